"""``python -m app serve`` as an operator runs it: starts without GitHub, records, stops on SIGTERM."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.harness import free_port

ROOT = Path(__file__).resolve().parents[1]


def test_serve_records_deliveries_with_github_down_and_stops_cleanly_on_sigterm(
    tmp_path: Path, private_key_pem: str
) -> None:
    port = free_port()
    database = tmp_path / "serve.sqlite3"
    env = {
        **os.environ,
        "APP_ID": "1",
        "PRIVATE_KEY": private_key_pem,
        "WEBHOOK_SECRET": "s3cret",
        "GITHUB_API_URL": f"http://127.0.0.1:{free_port()}",  # nothing listens: GitHub unreachable
        "DATABASE_URL": f"sqlite:///{database}",
        "HOST": "127.0.0.1",
        "PORT": str(port),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "app", "serve"], env=env, cwd=ROOT, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as answer:
                    health = json.loads(answer.read())
                    break
            except OSError:
                assert time.monotonic() < deadline, "serve never answered /healthz"
                time.sleep(0.1)
        assert health["status"] == "ok" and health["app_slug"] is None
        body = json.dumps({"action": "opened", "installation": {"id": 1}}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/github/webhooks",
            data=body,
            headers={
                "X-GitHub-Event": "pull_request",
                "X-GitHub-Delivery": "while-github-is-down",
                "X-Hub-Signature-256": "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest(),
                "Content-Type": "application/json",
            },
        )
        with urllib.request.urlopen(request, timeout=5) as answer:
            assert answer.status == 202
        started = time.monotonic()
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
        assert time.monotonic() - started < 25
    finally:
        if server.poll() is None:
            server.kill()
    with sqlite3.connect(database) as db:
        rows = db.execute(
            "SELECT status FROM deliveries WHERE delivery_id = 'while-github-is-down'"
        ).fetchall()
    assert rows == [("queued",)]
    assert server.stderr is not None and "shutting down" in server.stderr.read().decode()
