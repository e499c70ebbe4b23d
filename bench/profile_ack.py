"""Profile: where ``python -m app serve`` spends its time acknowledging deliveries at c64.

Starts ``serve`` on SQLite pinned to CPU 0, loads it with the shared harness's signed 25 KB
deliveries at c64 (wrk on CPU 1), samples it with py-spy (``pip install py-spy``; needs ptrace) for
``--seconds`` while the load runs, and prints the top frames by own time (the leaf of each
sampled stack; ``--gil`` counts only samples holding the GIL) and by total time. A script, not a
test:

    python bench/profile_ack.py [--seconds 8] [--top 15] [--loop auto|uvloop|asyncio] [--gil]
                                [--drain]

``--drain`` samples the worker instead, for ``--seconds`` after the load has stopped.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from webhook_ack import free_port, pem, wait_ready  # this script's directory is on sys.path

ROOT = Path(__file__).resolve().parents[1]
HARNESS = Path(os.environ.get("BENCH_HARNESS", "/tmp/bench"))
PATH = "/api/github/webhooks"
PY_SPY = Path(sys.executable).with_name("py-spy")  # installed in the venv beside python


def frame_name(frame: str) -> str:
    """``func (path/to/module.py:123)`` -> ``func (module.py)``: one entry per function."""
    name, _, where = frame.partition(" (")
    return f"{name} ({Path(where.rstrip(')').rsplit(':', 1)[0]).name})" if where else name


def tally(raw: Path) -> tuple[int, Counter[str], Counter[str]]:
    """py-spy's raw (collapsed) output: samples, and per function its own and its total samples."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [frame_name(f) for f in stack.split(";") if f]
        if not frames:
            continue
        n = int(count)
        samples += n
        own[frames[-1]] += n
        for name in set(frames):
            total[name] += n
    return samples, own, total


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--loop", default="auto")
    parser.add_argument("--gil", action="store_true")
    parser.add_argument(
        "--drain", action="store_true", help="profile the worker after the load, as it drains the queue"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="revbot-profile-") as tmp:
        work = Path(tmp)
        (work / "key.pem").write_text(pem())
        port = free_port()
        env = {
            **os.environ,
            "APP_ID": "1",
            "PRIVATE_KEY_PATH": str(work / "key.pem"),
            "WEBHOOK_SECRET": "bench-secret",
            "APP_SLUG": "revbot",
            "GITHUB_API_URL": "http://127.0.0.1:9",
            "DATABASE_URL": f"sqlite:///{work / 'profile.sqlite3'}",
            "HOST": "127.0.0.1",
            "PORT": str(port),
            "LOG_LEVEL": "warning",
            "EVENT_LOOP": args.loop,
        }
        server = subprocess.Popen(
            ["taskset", "-c", "0", sys.executable, "-m", "app", "serve"], cwd=ROOT, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_ready(f"http://127.0.0.1:{port}/healthz")
            load = subprocess.Popen(
                ["taskset", "-c", "1", "wrk", "-t2", "-c64", f"-d{args.seconds + 4}s",
                 "-s", str(HARNESS / "post_webhook.lua"), f"http://127.0.0.1:{port}{PATH}", "--",
                 str(HARNESS / ".work/payload.json"), str(HARNESS / ".work/payload.sig"),
                 os.urandom(4).hex()],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            raw = work / "profile.txt"
            if args.drain:
                out, _ = load.communicate(timeout=args.seconds + 60)
            subprocess.run(
                [str(PY_SPY), "record", "--pid", str(server.pid), "--duration", str(args.seconds),
                 "--rate", "250", "--format", "raw", "--output", str(raw), "--nonblocking",
                 *(["--gil"] if args.gil else [])],
                check=True, capture_output=True,
            )  # fmt: skip
            if not args.drain:
                out, _ = load.communicate(timeout=args.seconds + 60)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
        samples, own, total = tally(raw)
    bench = next((line for line in out.splitlines() if line.startswith("BENCH")), "BENCH (none)")
    which = "GIL held" if args.gil else "all threads"
    when = "draining after" if args.drain else "at"
    print(f"{samples} samples over {args.seconds} s {when} c64 ({which}); {bench}")
    print("own time:")
    for name, n in own.most_common(args.top):
        print(f"  {100 * n / samples:5.1f}%  {name}")
    print("total time:")
    for name, n in total.most_common(args.top + 10):
        print(f"  {100 * n / samples:5.1f}%  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
