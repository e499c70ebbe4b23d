"""``python -m app serve`` as an operator runs it: starts without GitHub, records, stops on SIGTERM."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import asyncpg
import pytest
import sqlalchemy.exc

from app.store import postgres, sqlite
from tests.harness import free_port

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_serve_records_deliveries_with_github_down_and_stops_cleanly_on_sigterm(
    tmp_path: Path, private_key_pem: str, loop: str
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
        "METRICS_TOKEN": "serve test token",
        "EVENT_LOOP": loop,
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "app", "serve"], env=env, cwd=ROOT, stderr=subprocess.PIPE
    )
    details = urllib.request.Request(
        f"http://127.0.0.1:{port}/healthz", headers={"Authorization": "Bearer serve test token"}
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(details, timeout=1) as answer:
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
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
    finally:
        if server.poll() is None:
            server.kill()
    with sqlite3.connect(database) as db:
        rows = db.execute(
            "SELECT status FROM deliveries WHERE delivery_id = 'while-github-is-down'"
        ).fetchall()
    assert rows == [("queued",)]
    assert server.stderr is not None
    logged = server.stderr.read().decode()
    assert f"event loop: {loop}" in logged and "shutting down" in logged


def service_env(tmp_path: Path, private_key_pem: str, **changes: str) -> dict[str, str]:
    return {
        **os.environ,
        "APP_ID": "1",
        "PRIVATE_KEY": private_key_pem,
        "WEBHOOK_SECRET": "s3cret",
        "GITHUB_API_URL": f"http://127.0.0.1:{free_port()}",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'serve.sqlite3'}",
        "HOST": "127.0.0.1",
        "PORT": str(free_port()),
        **changes,
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "changes", "exit_status", "line"),
    [
        ("serve", {"APP_ID": "abc"}, 2, r"revbot: configuration error: APP_ID: .+"),
        ("worker", {"EVENT_LOOP": "trio"}, 2, r"revbot: configuration error: EVENT_LOOP: .+"),
        (
            "serve",
            {"HTTP_BODY_BUDGET_BYTES": "1000"},
            2,
            r"revbot: configuration error: HTTP_BODY_BUDGET_BYTES: .+",
        ),
        (
            "serve",
            {"PORT": "{busy}"},
            1,
            r"revbot: cannot listen on 127\.0\.0\.1:\d+: address already in use",
        ),
        (
            "worker",
            {
                "DATABASE_URL": "postgresql://revbot:revbot@127.0.0.1:{closed}/revbot",
                "DATABASE_STARTUP_TIMEOUT": "1",
            },
            1,
            r"revbot: database PostgreSQL 127\.0\.0\.1:\d+/revbot unusable: ConnectionRefusedError: .+",
        ),
        (
            "serve",
            {"DATABASE_URL": "sqlite:///{file}/data/revbot.sqlite3"},
            1,
            r"revbot: cannot prepare the database SQLite .+/data/revbot\.sqlite3: NotADirectoryError: .+",
        ),
    ],
)
def test_a_failed_start_is_one_line_naming_the_problem(
    tmp_path: Path, private_key_pem: str, command: str, changes: dict[str, str], exit_status: int, line: str
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        values = {"busy": str(busy.getsockname()[1]), "closed": str(free_port()), "file": str(a_file)}
        env = service_env(tmp_path, private_key_pem, **{k: v.format(**values) for k, v in changes.items()})
        done = subprocess.run(
            [sys.executable, "-m", "app", command], env=env, cwd=ROOT, capture_output=True, timeout=120
        )
    printed = [
        text for text in done.stderr.decode().splitlines() if not text.startswith("{")
    ]  # not log lines
    assert done.returncode == exit_status, done.stderr.decode()
    assert len(printed) == 1 and re.fullmatch(line, printed[0]), printed
    assert "Traceback" not in done.stderr.decode()


@pytest.mark.slow
def test_with_log_level_debug_a_failed_start_shows_its_traceback_too(
    tmp_path: Path, private_key_pem: str
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    env = service_env(
        tmp_path, private_key_pem, DATABASE_URL=f"sqlite:///{a_file}/db.sqlite3", LOG_LEVEL="debug"
    )
    done = subprocess.run(
        [sys.executable, "-m", "app", "serve"], env=env, cwd=ROOT, capture_output=True, timeout=120
    )
    assert done.returncode == 1
    assert "revbot: cannot prepare the database" in done.stderr.decode()
    assert "Traceback (most recent call last)" in done.stderr.decode()


@pytest.mark.slow
def test_a_database_outage_is_logged_once_and_sigterm_still_exits_cleanly(
    tmp_path: Path, private_key_pem: str
) -> None:
    """Another process holds SQLite's write lock past the busy timeout: the worker's claims fail,
    which is logged once (not once per poll), and SIGTERM in the middle of it exits 0."""
    database = tmp_path / "serve.sqlite3"
    env = service_env(tmp_path, private_key_pem, APP_SLUG="revbot")
    server = subprocess.Popen(
        [sys.executable, "-m", "app", "serve"], env=env, cwd=ROOT, stderr=subprocess.PIPE
    )
    lines: list[dict[str, object]] = []
    reader = threading.Thread(target=lambda: collect_json_lines(server, lines), daemon=True)
    reader.start()
    locker: subprocess.Popen[bytes] | None = None
    try:
        wait_for(lambda: any("listening on" in str(x.get("msg")) for x in lines), "serve listening")
        locker = subprocess.Popen(
            [sys.executable, "-c", LOCK_HOLDER, str(database)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert locker.stdout is not None and locker.stdout.readline() == b"locked\n"
        wait_for(
            lambda: any(
                str(x.get("msg")).startswith("the worker's database access failed while claiming jobs")
                for x in lines
            ),
            "claims failing",
        )
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
    finally:
        if server.poll() is None:
            server.kill()
        if locker is not None:
            locker.kill()
            locker.wait()
    reader.join(timeout=10)
    failures = [
        x
        for x in lines
        if str(x.get("msg")).startswith("the worker's database access failed while claiming jobs")
    ]
    assert len(failures) == 1 and "database is locked" in str(failures[0]["msg"])
    assert any(x.get("msg") == "shutting down" for x in lines)
    assert not [x for x in lines if "exc" in x or x.get("level") == "error"]


LOCK_HOLDER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
"""


def collect_json_lines(process: subprocess.Popen[bytes], into: list[dict[str, object]]) -> None:
    assert process.stderr is not None
    for raw in process.stderr:
        try:
            into.append(json.loads(raw))
        except ValueError:
            into.append({"msg": raw.decode(errors="replace").rstrip(), "level": "raw"})


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 90
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


@pytest.mark.slow
def test_sigterm_while_waiting_for_the_database_at_boot_exits_cleanly(
    tmp_path: Path, private_key_pem: str
) -> None:
    env = service_env(
        tmp_path,
        private_key_pem,
        DATABASE_URL=f"postgresql://revbot:revbot@127.0.0.1:{free_port()}/revbot",
        DATABASE_STARTUP_TIMEOUT="600",
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "app", "worker"], env=env, cwd=ROOT, stderr=subprocess.PIPE
    )
    lines: list[dict[str, object]] = []
    reader = threading.Thread(target=lambda: collect_json_lines(worker, lines), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any("not reachable yet" in str(x.get("msg")) for x in lines), "the start retrying")
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
    reader.join(timeout=10)
    told = [
        x.get("msg")
        for x in lines
        if x.get("level") != "warning" and x.get("logger") != "app.settings.eventloop"
    ]
    assert told == ["shutting down"]


def wrapped(inner: BaseException) -> BaseException:
    """``inner`` as SQLAlchemy raises it: wrapped, with the driver's error as the cause."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise sqlalchemy.exc.OperationalError("SELECT 1", {}, exc) from exc
    except sqlalchemy.exc.OperationalError as outer:
        return outer


@pytest.mark.parametrize(
    ("error", "on_sqlite", "retried"),
    [
        (ConnectionRefusedError(111, "Connect call failed"), False, True),
        (socket.gaierror(-2, "Name or service not known"), False, True),  # DNS not ready yet at boot
        (TimeoutError(), False, True),
        (wrapped(asyncpg.CannotConnectNowError("the database system is starting up")), False, True),
        (wrapped(asyncpg.InvalidPasswordError("password authentication failed")), False, False),
        (wrapped(asyncpg.InvalidCatalogNameError('database "x" does not exist')), False, False),
        (wrapped(sqlite3.OperationalError("database is locked")), True, True),
        (wrapped(sqlite3.OperationalError("unable to open database file")), True, False),
        (NotADirectoryError(20, "Not a directory"), True, False),
        (RuntimeError("database schema version 9 is newer than this code (1)"), False, False),
    ],
)
def test_which_startup_database_errors_are_waited_out(
    error: BaseException, on_sqlite: bool, retried: bool
) -> None:
    not_reachable_yet = (sqlite if on_sqlite else postgres).not_reachable_yet
    assert not_reachable_yet(error) is retried


@pytest.mark.slow
@pytest.mark.parametrize(("arguments", "runs_jobs"), [([], True), (["--no-worker"], False)])
def test_serve_runs_its_worker_unless_told_not_to(
    tmp_path: Path, private_key_pem: str, arguments: list[str], runs_jobs: bool
) -> None:
    """``serve --no-worker`` is the door alone: it records deliveries, and ``python -m app worker``
    processes run the jobs, so no review takes the door's CPU. ``/healthz`` says whether a worker
    runs in the process, and so does the line that says it listens."""
    env = service_env(tmp_path, private_key_pem, METRICS_TOKEN="serve test token")
    server = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", *arguments], env=env, cwd=ROOT, stderr=subprocess.PIPE
    )
    lines: list[dict[str, object]] = []
    reader = threading.Thread(target=lambda: collect_json_lines(server, lines), daemon=True)
    reader.start()
    details = urllib.request.Request(
        f"http://127.0.0.1:{env['PORT']}/healthz", headers={"Authorization": "Bearer serve test token"}
    )
    try:
        wait_for(
            lambda: server.poll() is not None or any("listening on" in str(x.get("msg")) for x in lines),
            "serve listening",
        )
        assert server.poll() is None, lines  # it started
        with urllib.request.urlopen(details, timeout=5) as answer:
            health = json.loads(answer.read())
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
    finally:
        if server.poll() is None:
            server.kill()
    reader.join(timeout=10)
    assert health["status"] == "ok"
    assert (health["worker"] is not None) is runs_jobs
    [listening] = [str(x["msg"]) for x in lines if "listening on" in str(x.get("msg"))]
    assert ("no worker here" not in listening) is runs_jobs
