"""Benchmark: time from a review request to the posted review, and GitHub API calls per review.

Runs the real bot (``Runtime``: webhook endpoint, ledger, worker, review engine) against the fake
GitHub on loopback, for a 10-file and a 250-file pull request (Python files, a few with
defects), and prints, per size: seconds from the ``review_requested`` delivery to the review's
POST being answered, to the check run's completion, and the API calls the job made by kind:
``calls`` all of them, ``counted`` those that count against the installation's primary rate
limit (the fake's own record: a conditional request answered 304 does not, nor does the App's
own call that mints the installation's token, which GitHub counts against the App). The fake
answers each call after ``--latency-ms`` (80 by default, about a GitHub round trip from a cloud
host), so the times are what a person waits. The first review is cold (nothing cached: a new
installation's first pull request). Then a second request on the same, unchanged head
(``again``: what the conditional requests save), and a review of another pull request of the
same size in the same repository (``next PR``: what every later review pays, with the
installation's token and the repository's conditional answers warm). It is a script, not a test:

    python bench/review_latency.py [--runs 3] [--loops asyncio,uvloop] [--latency-ms 80] [--calls]

(``--calls``: every call of the last run's review, in order, to find a read made twice)

(each loop in turn, in one run: ``serve`` runs on uvloop where installed, ``app/eventloop.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from app.jobs.worker import WorkerOptions
from app.runtime import Runtime
from app.sandbox import Call, FakeGitHub
from app.settings import eventloop
from app.settings.config import load_settings
from app.settings.eventloop import EventLoop

SLUG = "revbot"
REPO = "bench/widgets"
SECRET = "bench secret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def files_for(count: int) -> dict[str, str | None]:
    files: dict[str, str | None] = {}
    for n in range(count):
        body = "".join(f"def function_{n}_{k}(value):\n    return value + {k}\n\n\n" for k in range(20))
        if n % 25 == 7:
            body += "def broken():\n    return missing_name\n"
        files[f"pkg/module_{n:03}.py"] = body
    return files


def kind(method: str, path: str) -> str:
    parts = path.strip("/").split("/")
    if path == "/graphql":
        return "POST graphql"
    if path.startswith("/app/"):
        return f"{method} app token"
    tail = [p for p in parts[3:] if not p.isdigit() and len(p) != 40]
    return f"{method} {'/'.join(tail) or 'repo'}"


@dataclass
class Run:
    reviewed: float  # seconds to the review's POST answered
    completed: float  # seconds to the check run completed
    calls: Counter[str]  # by kind
    counted: int  # calls that count against the primary rate limit
    again_calls: int  # the same request again, on the unchanged head
    again_counted: int
    next_calls: int  # another pull request of the same repository, reviewed next
    next_counted: int
    log: list[str]  # every call of the first request, in order (``--calls``)


def logged(calls: list[Call]) -> list[str]:
    """Each call as ``status METHOD kind``, so a duplicate read shows as two equal lines."""
    return [f"{c.status} {kind(c.method, c.path)}" for c in calls if c.path != "/app"]


def spent(calls: list[Call]) -> tuple[Counter[str], int]:
    mine = [c for c in calls if c.path != "/app"]
    return Counter(kind(c.method, c.path) for c in mine), sum(c.auth == "token" and c.counted for c in mine)


async def settle(fake: FakeGitHub, runtime: Runtime) -> None:
    """Let the echoes (review submitted, decoy removed, check run events) run their course."""
    for _ in range(3):
        await fake.settle()
        while {"waiting", "queued", "running"} & (await runtime.store.jobs_by_status()).keys():  # noqa: ASYNC110 - polling the database, not an in-process flag
            await asyncio.sleep(0.01)


async def one_run(size: int, work: Path, latency: float) -> Run:
    fake = FakeGitHub(app_id=1, app_slug=SLUG, webhook_secret=SECRET)
    if latency:
        fake.delay("*", ".*", latency)
    fake.add_installation(7, "bench")
    fake.add_repo(REPO, installation_id=7)
    fake.add_user(SLUG)
    fake.push(REPO, "main", {"README.md": "# bench\n"})
    fake.push(REPO, "feature", files_for(size))
    fake.push(REPO, "other", {path: text + "\n\nNEXT = 2\n" for path, text in files_for(size).items()})
    number = int(fake.open_pull(REPO, head="feature", author="alice")["number"])
    fake_port, bot_port = free_port(), free_port()
    fake.webhook_url = f"http://127.0.0.1:{bot_port}/api/github/webhooks"
    await fake.start(port=fake_port)
    settings, pem = load_settings(
        {
            "APP_ID": "1",
            "PRIVATE_KEY": fake.private_key_pem,
            "WEBHOOK_SECRET": SECRET,
            "GITHUB_API_URL": fake.base_url,
            "DATABASE_URL": f"sqlite:///{work / f'bench-{size}-{time.time_ns()}.sqlite3'}",
        }
    )
    runtime = Runtime(settings, pem, worker_options=WorkerOptions(poll_seconds=0.05, claim_interval=0.0))
    await runtime.start()
    runner = web.AppRunner(runtime.web_app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", bot_port).start()
    assert runtime.identity is not None
    await runtime.identity.get()
    try:
        first_call = len(fake.calls)
        started = time.perf_counter()
        await fake.request_review(REPO, number, SLUG, by="alice")
        reviewed = completed = 0.0
        while not completed:
            await asyncio.sleep(0.005)
            for call in fake.calls[first_call:]:
                if not reviewed and call.method == "POST" and call.path.endswith("/reviews") and call.status:
                    reviewed = time.perf_counter() - started
                written = call.method in ("POST", "PATCH") and "/check-runs" in call.path
                if written and (call.body or {}).get("status") == "completed" and call.status:
                    completed = time.perf_counter() - started
            if time.perf_counter() - started > 120:
                raise TimeoutError("no review within 120 s")
        await settle(fake, runtime)
        calls, counted = spent(fake.calls[first_call:])
        log = logged(fake.calls[first_call:])
        again_from = len(fake.calls)
        await fake.request_review(REPO, number, SLUG, by="alice")
        await settle(fake, runtime)
        again, again_counted = spent(fake.calls[again_from:])
        following = int(fake.open_pull(REPO, head="other", author="alice")["number"])
        await settle(fake, runtime)
        next_from = len(fake.calls)
        await fake.request_review(REPO, following, SLUG, by="alice")
        await settle(fake, runtime)
        following_calls, next_counted = spent(fake.calls[next_from:])
    finally:
        await runner.cleanup()
        await runtime.stop()
        await fake.stop()
    return Run(
        reviewed,
        completed,
        calls,
        counted,
        sum(again.values()),
        again_counted,
        sum(following_calls.values()),
        next_counted,
        log,
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--loops", default="asyncio,uvloop", help="event loops to run it on, in turn")
    parser.add_argument("--latency-ms", type=float, default=80.0, help="the fake's answer time per call")
    parser.add_argument("--calls", action="store_true", help="print each call of a review, in order")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    for name in args.loops.split(","):
        loop = eventloop.chosen(EventLoop(name), installed=eventloop.uvloop_installed())
        if loop is None:
            print(eventloop.NOT_INSTALLED, file=sys.stderr)
            return 2
        print(f"on {loop}:")
        eventloop.run(sizes(args.runs, args.latency_ms / 1000, show_calls=args.calls), loop=loop)
    return 0


async def sizes(runs: int, latency: float, *, show_calls: bool = False) -> None:
    with tempfile.TemporaryDirectory(prefix="revbot-review-bench-") as tmp:
        print(f"GitHub's answer time: {latency * 1000:.0f} ms a call")
        print(f"{'files':>6} {'review posted s':>16} {'check done s':>13}  calls  by kind")
        for size in (10, 250):
            results = [await one_run(size, Path(tmp), latency) for _ in range(runs)]
            last = results[-1]
            breakdown = ", ".join(f"{k}: {v}" for k, v in sorted(last.calls.items()))
            posted = statistics.median(r.reviewed for r in results)
            done = statistics.median(r.completed for r in results)
            print(
                f"{size:>6} {posted:>16.3f} {done:>13.3f}  calls={sum(last.calls.values())} "
                f"counted={last.counted}  {breakdown}"
            )
            print(f"{'':>6} {'again, same head':>30}  calls={last.again_calls} counted={last.again_counted}")
            print(f"{'':>6} {'next PR, same repository':>30}  calls={last.next_calls} counted={last.next_counted}")
            if show_calls:
                print("\n".join(f"{'':>8}{line}" for line in last.log))


if __name__ == "__main__":
    sys.exit(main())
