"""Benchmark: webhook acknowledgements per second, latency, and durability of every 2xx.

Loads ``python -m app serve`` (SQLite, in-process worker, pinned to one core) and, in the same
run, a minimal receiver (the floor: aiohttp + gidgethub verify/parse/route, no storage) with
signed ~25 KB ``pull_request`` deliveries, each with a unique delivery id, using ``wrk`` (Debian
package) pinned to the other core. After each server run it counts the ledger rows and checks
there is one per 2xx answer. Prints a table; it is a script, not a test.

    python bench/webhook_ack.py [--seconds 10] [--connections 16 64]
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = (
    ROOT / "tests" / "fixtures" / "github" / "webhooks" / "examples" / "pull_request" / "opened.payload.json"
)
SECRET = "bench-secret"
PATH = "/api/github/webhooks"
TARGET_BYTES = 25 * 1024

LUA = """
local counter = 0
local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end
function init(args)
  local f = assert(io.open("{body}", "rb"))
  body = f:read("*a")
  f:close()
  prefix = "{run}-" .. tostring(tid) .. "-"
  wrk.method = "POST"
  wrk.body = body
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["X-GitHub-Event"] = "pull_request"
  wrk.headers["X-Hub-Signature-256"] = "{signature}"
end
function request()
  counter = counter + 1
  wrk.headers["X-GitHub-Delivery"] = prefix .. tostring(counter)
  return wrk.format(nil, "{path}")
end
"""


@dataclass
class Result:
    name: str
    connections: int
    requests: int
    rps: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    errors: str
    ledger_rows: int | None = None


def payload() -> bytes:
    data = json.loads(EXAMPLE.read_text())
    data = copy.deepcopy(data)
    size = len(json.dumps(data).encode())
    data["pull_request"]["body"] = "Benchmark padding. " * ((TARGET_BYTES - size) // 19 + 1)
    return json.dumps(data).encode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server at {url} did not come up")


def pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if match is None:
        raise RuntimeError(f"cannot read a wrk duration from {text!r}")
    value, unit = match.groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit]


def run_wrk(
    port: int, connections: int, seconds: int, template: str
) -> tuple[int, float, float, float, int, str]:
    """One wrk run; every run gets its own delivery-id prefix so no id repeats across runs."""
    lua = Path(tempfile.mkstemp(suffix=".lua")[1])
    lua.write_text(template.replace("{run}", f"r{time.time_ns()}"))
    out = subprocess.run(
        [
            "taskset",
            "-c",
            "1",
            "wrk",
            "-t",
            "1",
            "-c",
            str(connections),
            "-d",
            f"{seconds}s",
            "--latency",
            "-s",
            str(lua),
            f"http://127.0.0.1:{port}{PATH}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lua.unlink()
    if "Latency Distribution" not in out:
        raise RuntimeError(f"unexpected wrk output:\n{out}")
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = ms(re.search(r"^\s+50%\s+(\S+)\s*$", out, re.MULTILINE).group(1))  # type: ignore[union-attr]
    p99 = ms(re.search(r"^\s+99%\s+(\S+)\s*$", out, re.MULTILINE).group(1))  # type: ignore[union-attr]
    non2xx_match = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors_match = re.search(r"Socket errors: (.*)", out)
    return (
        requests,
        rps,
        p50,
        p99,
        int(non2xx_match.group(1)) if non2xx_match else 0,
        (errors_match.group(1) if errors_match else ""),
    )


def start(cmd: list[str], env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        ["taskset", "-c", "0", *cmd], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    wait_ready(f"http://127.0.0.1:{port}/healthz" if "app" in cmd else f"http://127.0.0.1:{port}/", 30)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, nargs="+", default=[16, 64])
    args = parser.parse_args()
    if not shutil.which("wrk") or not shutil.which("taskset"):
        print("needs wrk and taskset (Debian: apt-get install wrk util-linux)", file=sys.stderr)
        return 2
    body = payload()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    work = Path(tempfile.mkdtemp(prefix="revbot-bench-"))
    (work / "body.json").write_bytes(body)
    key = pem()
    results: list[Result] = []
    for connections in args.connections:
        lua = LUA.replace("{body}", str(work / "body.json")).replace("{signature}", signature)
        lua = lua.replace("{path}", PATH)
        # the floor
        port = free_port()
        floor_cmd = [sys.executable, str(ROOT / "bench" / "floor_receiver.py"), str(port), SECRET]
        floor = subprocess.Popen(
            ["taskset", "-c", "0", *floor_cmd], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(1.5)
        try:
            run_wrk(port, connections, 2, lua)  # warm-up
            requests, rps, p50, p99, non2xx, errors = run_wrk(port, connections, args.seconds, lua)
        finally:
            stop(floor)
        results.append(Result("floor (no storage)", connections, requests, rps, p50, p99, non2xx, errors))
        # revbot serve
        port = free_port()
        database = work / f"revbot-{connections}.sqlite3"
        env = {
            **os.environ,
            "APP_ID": "1",
            "PRIVATE_KEY": key,
            "WEBHOOK_SECRET": SECRET,
            "APP_SLUG": "revbot",
            "GITHUB_API_URL": "http://127.0.0.1:9",
            "DATABASE_URL": f"sqlite:///{database}",
            "PORT": str(port),
            "HOST": "127.0.0.1",
            "LOG_LEVEL": "warning",
        }
        server = start([sys.executable, "-m", "app", "serve"], env, port)
        try:
            run_wrk(port, connections, 2, lua)
            with sqlite3.connect(database) as db:
                before = db.execute("SELECT count(*) FROM deliveries").fetchone()[0]
            requests, rps, p50, p99, non2xx, errors = run_wrk(port, connections, args.seconds, lua)
        finally:
            stop(server)
        with sqlite3.connect(database) as db:
            rows = db.execute("SELECT count(*) FROM deliveries").fetchone()[0] - before
        results.append(
            Result("revbot serve (SQLite)", connections, requests, rps, p50, p99, non2xx, errors, rows)
        )
    print(f"payload {len(body)} bytes, {args.seconds}s per run, server on CPU 0, wrk on CPU 1")
    print(
        f"{'server':<24}{'conns':>6}{'acks/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'non-2xx':>9}{'ledger rows':>13}"
    )
    for r in results:
        rows = "" if r.ledger_rows is None else str(r.ledger_rows)
        print(
            f"{r.name:<24}{r.connections:>6}{r.rps:>10.0f}{r.p50_ms:>9.2f}{r.p99_ms:>9.2f}{r.non_2xx:>9}{rows:>13}"
            + (f"  socket errors: {r.errors}" if r.errors else "")
        )
    for r in results:
        if r.ledger_rows is not None:
            # wrk counts only completed responses; a 2xx is sent only after its row committed, so
            # rows >= 2xx answers (a request cut off by the end of the run may have committed too).
            ok = r.ledger_rows >= r.requests - r.non_2xx
            print(
                f"durability @{r.connections}: {r.requests - r.non_2xx} 2xx answers, {r.ledger_rows} rows "
                f"-> {'every 2xx has its row' if ok else 'MISSING ROWS'}"
            )
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
