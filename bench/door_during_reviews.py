"""Benchmark: the webhook door while reviews run. The webhook p99 at c16 while 8 reviews of
250-file pull requests run, against its idle p99 on the same server in the same run.

``python -m app serve`` (web and worker in one process, as deployed, on SQLite) is pinned to CPU 0;
this script runs the fake GitHub (``app/sandbox``) and wrk on CPU 1, so the bot's core holds only
the bot (and whatever it starts: analysis runs wherever the code runs it, which is what is
measured). Each round:

1. **idle**: wrk posts the shared harness's signed 25 KB ``pull_request`` deliveries (unique ids)
   at c16 for ``--duration`` seconds; the queue is drained after it;
2. **during reviews**: wrk at c16 again, and 0.5 s into it the fake GitHub requests the bot's
   review on 8 pull requests of 250 Python files each (a few with defects), whose webhooks come
   through the same door; the load stops when the last review is posted, so the window is the
   reviews' run. Printed: p99 against the idle p99, and when each review was posted.

Ratios within one round; ``--rounds`` shows the noise. A script, not a test:

    cp -r ../shared/bench /tmp/bench && cp -r ../shared/conformance /tmp/conformance
    (cd /tmp/bench && ./setup.sh)
    python bench/door_during_reviews.py [--rounds 3] [--duration 10] [--reviews 8] [--files 250]
                                        [--profile]   # py-spy the server during the reviews
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from profile_ack import PY_SPY, tally  # this script's directory is on sys.path
from review_latency import REPO, SLUG, files_for
from webhook_ack import free_port

from app.sandbox import FakeGitHub

ROOT = Path(__file__).resolve().parents[1]
HARNESS = Path(os.environ.get("BENCH_HARNESS", "/tmp/bench"))
SECRET = "bench-secret"  # the harness's payload is signed with it
PATH = "/api/github/webhooks"
PENDING = ("waiting", "queued", "running")
REVIEW_BOUND = 600.0  # seconds: the reviews not all posted by then is a failure, not a figure


async def wrk(port: int, conns: int, duration: float, stop: asyncio.Event | None = None) -> dict[str, int]:
    """One wrk run against the bot, pinned to CPU 1, for ``duration`` or until ``stop`` is set (wrk
    ends on SIGINT as at its deadline); the harness script's BENCH line as numbers."""
    proc = await asyncio.create_subprocess_exec(
        "taskset", "-c", "1", "wrk", "-t2", f"-c{conns}", f"-d{duration:g}s", "--timeout", "10s",
        "-s", str(HARNESS / "post_webhook.lua"), f"http://127.0.0.1:{port}{PATH}", "--",
        str(HARNESS / ".work/payload.json"), str(HARNESS / ".work/payload.sig"), os.urandom(4).hex(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    done = asyncio.ensure_future(proc.communicate())
    if stop is not None:
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait({done, stopped}, timeout=duration + 30, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if not done.done():
            proc.send_signal(signal.SIGINT)
    out, err = await asyncio.wait_for(done, timeout=duration + 30)
    found = re.search(r"^BENCH (.+)$", out.decode(), re.MULTILINE)
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"wrk failed: {err.decode()[-500:]}")
    return {k: int(v) for k, v in (pair.split("=") for pair in found.group(1).split())}


def pending_jobs(database: Path) -> int:
    with sqlite3.connect(database) as db:
        marks = ",".join("?" * len(PENDING))
        return int(
            db.execute(f"SELECT count(*) FROM deliveries WHERE status IN ({marks})", PENDING).fetchone()[0]
        )


async def drain(database: Path, bound: float = 120) -> float:
    started = time.monotonic()
    while pending_jobs(database):
        if time.monotonic() - started > bound:
            raise TimeoutError(f"the queue did not drain within {bound:.0f} s")
        await asyncio.sleep(0.1)
    return time.monotonic() - started


async def watch_reviews(fake: FakeGitHub, numbers: set[int], posted: dict[int, float]) -> None:
    """Fill ``posted``: PR number -> when (``time.monotonic``, to 20 ms) the fake had answered the
    bot's review POST for it."""
    seen = 0
    while len(posted) < len(numbers):
        for call in fake.calls[seen:]:
            found = re.fullmatch(rf"/repos/{REPO}/pulls/(\d+)/reviews", call.path)
            if call.method == "POST" and found and 200 <= call.status < 300:
                posted.setdefault(int(found.group(1)), time.monotonic())
        # A call is recorded before it is answered: read again the ones not answered yet.
        while seen < len(fake.calls) and fake.calls[seen].status:
            seen += 1
        await asyncio.sleep(0.02)


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of idle load")
    parser.add_argument("--conns", type=int, default=16)
    parser.add_argument("--reviews", type=int, default=8)
    parser.add_argument("--files", type=int, default=250)
    parser.add_argument("--profile", action="store_true", help="py-spy the server while the reviews run")
    parser.add_argument(
        "--gil", action="store_true", help="with --profile: only samples holding the GIL (what the loop waits on)"
    )
    args = parser.parse_args()
    if not (HARNESS / ".work" / "payload.json").exists():
        print(f"needs the shared harness set up in {HARNESS} (see this script's docstring)", file=sys.stderr)
        return 2
    os.sched_setaffinity(0, {1})  # the fake GitHub shares wrk's core, never the bot's
    with tempfile.TemporaryDirectory(prefix="revbot-door-") as tmp:
        rows = []
        for rnd in range(1, args.rounds + 1):
            rows.append(await one_round(rnd, args, Path(tmp)))
        idle = [r[0] for r in rows]
        busy = [r[1] for r in rows]
        ratio = statistics.median(b / i for i, b in rows)
        print(
            f"over {args.rounds} round(s): idle p99 {min(idle):.1f}-{max(idle):.1f} ms, during reviews "
            f"{min(busy):.1f}-{max(busy):.1f} ms; ratio median {ratio:.2f}x"
        )
    return 0


async def one_round(rnd: int, args: argparse.Namespace, work: Path) -> tuple[float, float]:
    fake = FakeGitHub(app_id=1, app_slug=SLUG, webhook_secret=SECRET)
    fake.add_installation(7, "bench")
    fake.add_repo(REPO, installation_id=7)
    fake.add_user(SLUG)
    fake.push(REPO, "main", {"README.md": "# bench\n"})
    numbers = []
    for n in range(args.reviews):
        fake.push(REPO, f"feature-{n}", files_for(args.files))
        numbers.append(int(fake.open_pull(REPO, head=f"feature-{n}", author="alice")["number"]))
    port = free_port()
    fake.webhook_url = f"http://127.0.0.1:{port}{PATH}"
    await fake.start(port=free_port())
    database = work / f"door-{rnd}.sqlite3"
    env = {
        **os.environ,
        "APP_ID": "1",
        "PRIVATE_KEY": fake.private_key_pem,
        "WEBHOOK_SECRET": SECRET,
        "GITHUB_API_URL": fake.base_url,
        "DATABASE_URL": f"sqlite:///{database}",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "LOG_LEVEL": "warning",
    }
    server = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything is measured
        ["taskset", "-c", "0", sys.executable, "-m", "app", "serve"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(work / f"serve-{rnd}.log", "wb"),  # noqa: SIM115, ASYNC230 - lives as long as the server
    )
    try:
        await wait_healthy(port)
        await wrk(port, args.conns, 2)  # warm-up, discarded
        await drain(database)
        idle = await wrk(port, args.conns, args.duration)
        idle_drain = await drain(database)

        async def request_reviews() -> float:
            await asyncio.sleep(0.5)
            asked = time.monotonic()
            await asyncio.gather(*(fake.request_review(REPO, n, SLUG, by="alice") for n in numbers))
            return asked

        seen: dict[int, float] = {}
        all_posted = asyncio.Event()

        async def watch() -> None:
            await watch_reviews(fake, set(numbers), seen)
            all_posted.set()

        watcher = asyncio.create_task(watch())
        spy = None
        if args.profile:
            spy = await asyncio.create_subprocess_exec(
                str(PY_SPY), "record", "--pid", str(server.pid), "--rate", "100", "--format", "raw",
                "--output", str(work / "during.txt"), "--nonblocking", "--subprocesses",
                *(["--gil"] if args.gil else []),
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
        load_started = time.monotonic()
        busy, asked = await asyncio.gather(wrk(port, args.conns, REVIEW_BOUND, all_posted), request_reviews())
        load_ended = time.monotonic()
        await asyncio.wait_for(watcher, timeout=REVIEW_BOUND)
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            await spy.wait()
        posted = sorted(t - asked for t in seen.values())
        in_window = sum(1 for t in posted if asked + t <= load_ended)
        await drain(database)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        await fake.stop()
    p99_idle, p99_busy = idle["p99_us"] / 1000, busy["p99_us"] / 1000
    window = load_ended - load_started
    print(
        f"round {rnd}: c{args.conns} idle: {idle['requests'] / idle['duration_us'] * 1e6:.0f} req/s, "
        f"p50 {idle['p50_us'] / 1000:.1f} ms, p99 {p99_idle:.1f} ms, non-2xx {idle['non2xx']} "
        f"(queue drained {idle_drain:.1f} s after)\n"
        f"round {rnd}: c{args.conns} during {len(numbers)} reviews of {args.files} files: "
        f"{busy['requests'] / busy['duration_us'] * 1e6:.0f} req/s, p50 {busy['p50_us'] / 1000:.1f} ms, "
        f"p99 {p99_busy:.1f} ms = {p99_busy / p99_idle:.2f}x idle, max {busy['max_us'] / 1000:.0f} ms, "
        f"non-2xx {busy['non2xx']}\n"
        f"round {rnd}: reviews posted {posted[0]:.1f}-{posted[-1]:.1f} s after they were asked, "
        f"{in_window} of {len(numbers)} within the {window:.1f} s load window"
    )
    if args.profile:
        # py-spy names each sample's process in its first frame: the serving process apart from
        # the analysis children it started (they run at a lower priority: ``REVIEW_NICENESS``).
        raw = (work / "during.txt").read_text().splitlines()
        # a child's samples carry its own process frame after the server's
        ours = [line for line in raw if not line.partition(";")[2].startswith("process ")]
        for who, lines in (
            ("the serving process", ours),
            ("its analysis children", sorted(set(raw) - set(ours))),
        ):
            (work / "part.txt").write_text("\n".join(lines))
            samples, own, total = tally(work / "part.txt")
            for label, counts in (("own", own), ("total", total)):
                print(f"round {rnd}: py-spy while the reviews ran, {who}: {samples} samples, top {label} time:")
                for name, n in counts.most_common(12 if label == "own" else 30):
                    print(f"  {100 * n / max(samples, 1):5.1f}%  {name}")
    return p99_idle, p99_busy


async def wait_healthy(port: int, bound: float = 60) -> None:
    started = time.monotonic()
    while True:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            status = (await reader.readline()).decode()
            writer.close()
            if " 200 " in status:
                return
        except OSError:
            pass
        if time.monotonic() - started > bound:
            raise TimeoutError("serve never answered /healthz with 200")
        await asyncio.sleep(0.2)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
