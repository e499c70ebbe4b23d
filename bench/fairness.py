"""Benchmark: a quiet installation's review while another installation floods the bot.

Runs the real bot (``Runtime``: webhook endpoint, ledger, fair queue, worker and analysis pool at
their defaults, ``REVIEW_WORKERS`` included) against the fake GitHub on loopback, with GitHub's
real rate limits enforced by the fake (``app/sandbox/ratelimits.py``). Installation "flood" asks
for reviews on 300 pull requests within ``--flood-seconds``; installation "quiet" asks for one
review at a time, first with the bot idle, then during the flood. Prints the quiet
installation's delivery-to-review seconds (from the fake's delivery of ``review_requested``
being answered to the review's POST being answered) idle and during the flood, their ratio
(target: within 2x), how many of the flood's reviews were posted meanwhile (the bot paces that
installation's writes at nine tenths of GitHub's 80 a minute), and the count of 403/429 answers
(target: 0). It is a script, not a test:

    python bench/fairness.py [--flood 300] [--flood-seconds 30] [--samples 3]

The flood is not waited for: at GitHub's limits of writes it takes far longer than the run.
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
from pathlib import Path

from aiohttp import web

from app.runtime import Runtime
from app.sandbox import FakeGitHub
from app.settings.config import load_settings

SLUG = "revbot"
SECRET = "bench secret"
FLOOD_REPO, QUIET_REPO = "flood/widgets", "quiet/widgets"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def files(n: int) -> dict[str, str | None]:
    body = "".join(f"def function_{n}_{k}(value):\n    return value + {k}\n\n\n" for k in range(20))
    return {f"pkg/module_{n}.py": body, f"pkg/other_{n}.py": "def broken():\n    return missing_name\n"}


def pulls(fake: FakeGitHub, repo: str, count: int) -> list[int]:
    fake.push(repo, "main", {"README.md": "# bench\n"})
    numbers = []
    for n in range(count):
        fake.push(repo, f"b{n}", files(n))
        numbers.append(int(fake.open_pull(repo, head=f"b{n}", author="alice")["number"]))
    return numbers


class Watch:
    """Follows the fake's record: when each quiet delivery was answered, when its review was."""

    def __init__(self, fake: FakeGitHub) -> None:
        self.fake = fake
        self.delivered: dict[int, float] = {}
        self.reviewed: dict[int, float] = {}
        self.flood_reviews = 0
        self._hooks = self._calls = 0

    def poll(self) -> None:
        now = time.perf_counter()
        sent = self.fake.webhooks_sent
        for event, _, payload, status in sent[self._hooks :]:
            repo = (payload.get("repository") or {}).get("full_name")
            asked = event == "pull_request" and payload.get("action") == "review_requested"
            if asked and repo == QUIET_REPO and 200 <= status < 300:
                self.delivered.setdefault(int(payload["number"]), now)
        self._hooks = len(sent)
        calls = self.fake.calls
        for call in calls[self._calls :]:
            if call.status == 0:
                break  # still being answered: look again next time
            self._calls += 1
            if call.method == "POST" and call.path.endswith("/reviews") and 200 <= call.status < 300:
                if call.path.startswith(f"/repos/{QUIET_REPO}/"):
                    self.reviewed.setdefault(int(call.path.split("/")[5]), now)
                else:
                    self.flood_reviews += 1

    async def review(self, number: int, within: float = 300.0) -> float:
        """Ask the quiet installation's review of ``number``; its delivery-to-review seconds."""
        await self.fake.request_review(QUIET_REPO, number, SLUG, by="alice")
        deadline = time.perf_counter() + within
        while number not in self.reviewed:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"no review of {QUIET_REPO}#{number} within {within:.0f} s")
            await asyncio.sleep(0.005)
            self.poll()
        return self.reviewed[number] - self.delivered[number]


async def run(flood: int, flood_seconds: float, samples: int, work: Path) -> None:
    fake = FakeGitHub(app_id=1, app_slug=SLUG, webhook_secret=SECRET)  # GitHub's rate limits
    fake.add_user(SLUG)
    for installation, repo in ((7, FLOOD_REPO), (8, QUIET_REPO)):
        fake.add_installation(installation, repo.split("/")[0])
        fake.add_repo(repo, installation_id=installation)
    flooded = pulls(fake, FLOOD_REPO, flood)
    quiet = pulls(fake, QUIET_REPO, 2 * samples + 1)
    fake_port, bot_port = free_port(), free_port()
    fake.webhook_url = f"http://127.0.0.1:{bot_port}/api/github/webhooks"
    await fake.start(port=fake_port)
    settings, pem = load_settings(
        {
            "APP_ID": "1",
            "PRIVATE_KEY": fake.private_key_pem,
            "WEBHOOK_SECRET": SECRET,
            "GITHUB_API_URL": fake.base_url,
            "DATABASE_URL": f"sqlite:///{work / 'fairness.sqlite3'}",
            "READINESS_SETTLE_SECONDS": "86400",  # the flood's readiness looks come after the run
        }
    )
    runtime = Runtime(settings, pem)  # the worker's and the pool's defaults
    await runtime.start()
    runner = web.AppRunner(runtime.web_app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", bot_port).start()
    assert runtime.identity is not None
    await runtime.identity.get()
    watch = Watch(fake)
    try:
        await watch.review(quiet[0])  # warms the analysis children up; not counted
        idle = [await watch.review(number) for number in quiet[1 : samples + 1]]

        async def flood_them() -> None:
            for n, number in enumerate(flooded):
                await fake.request_review(FLOOD_REPO, number, SLUG, by="alice")
                await asyncio.sleep(max(0.0, flood_seconds * (n + 1) / flood - (time.perf_counter() - began)))

        began = time.perf_counter()
        flooding = asyncio.create_task(flood_them())
        during = []
        for number in quiet[samples + 1 :]:
            await asyncio.sleep(
                max(0.0, began + flood_seconds * (len(during) + 1) / (samples + 1) - time.perf_counter())
            )
            during.append(await watch.review(number))
        await flooding
        elapsed = time.perf_counter() - began
        watch.poll()
    finally:
        await runner.cleanup()
        await runtime.stop()
        await fake.stop()
    refused = [c for c in fake.calls if c.status in (403, 429)]
    print(f"flood: {flood} review requests from one installation in {flood_seconds:.0f} s")
    print(f"quiet installation, delivery to review (s): idle {', '.join(f'{s:.3f}' for s in idle)}")
    print(f"                                     during the flood {', '.join(f'{s:.3f}' for s in during)}")
    ratio = statistics.median(during) / statistics.median(idle)
    worst = max(during) / statistics.median(idle)
    print(f"median during / median idle: {ratio:.2f}x (worst {worst:.2f}x; target within 2x)")
    print(f"flood reviews posted in the {elapsed:.0f} s: {watch.flood_reviews} of {flood}")
    print(f"403/429 answers: {len(refused)} (target 0); GitHub API calls: {len(fake.calls)}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--flood", type=int, default=300, help="pull requests the flood asks reviews of")
    parser.add_argument("--flood-seconds", type=float, default=30.0, help="over how long")
    parser.add_argument("--samples", type=int, default=3, help="quiet reviews idle, and during the flood")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="revbot-fairness-bench-") as tmp:
        asyncio.run(run(args.flood, args.flood_seconds, args.samples, Path(tmp)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
