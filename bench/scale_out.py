"""Benchmark: reviews a minute as ``python -m app worker`` processes are added, on one PostgreSQL.

For each N of ``--workers``, on a database of its own (created on ``DATABASE_URL_TEST_PG``'s
server, named for the run, dropped after), against the fake GitHub on loopback (GitHub's rate
limits enforced, each call answered after ``--latency-ms``): the door, ``python -m app serve
--no-worker``, and N ``python -m app worker`` processes as deployed (8 slots and 2
analysis children each; a separate worker claims every second when idle: the door's wake-up does
not cross processes).

Warm-up reviews (not counted) until every worker has run one; then the flood: ``--reviews`` signed
``review_requested`` deliveries, one pull request each (``--files`` Python files), the first
installation's whole burst (``--big-share``), then the others' in turn. Printed: reviews a minute
(first delivery to last review posted), p50/p95 seconds from a delivery (the door's 2xx) to its
review posted (the fake's answer to the POST), the calls a review spent (counted against the
primary limit; content-creating), 403/429 answers, jobs deferred, and two checks (exit 1 if one
fails):

- once: each pull request holds one review of the bot (the fake's state), POSTed once, and every
  job ended done or skipped after one attempt (the job table);
- fair: the queue gives installations turns (``store.ops.FAIR_TURNS``: one with nothing running
  goes before one holding workers, however large its backlog), so a small installation, asking
  after the big one's burst, is not served behind it (as in a first-come queue): its first review
  starts (the bot's 👀 answered) within the big one's median wait, or a worker's poll.

The default flood keeps the big installation within its write pace (a review creates 3 things;
the bot paces 72 a minute per installation): a bigger share measures that pace, not the workers.

Every process it starts is stopped when it ends, on Ctrl-C and SIGTERM too:

    DATABASE_URL_TEST_PG=postgresql://revbot:revbot@127.0.0.1:5432/revbot_test \\
        python bench/scale_out.py [--workers 1,2,4] [--reviews 40] [--installations 4] [--logs DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from review_latency import files_for, free_port  # this script's directory is on sys.path
from sqlalchemy import and_, func, make_url, or_, select, text
from sqlalchemy.ext.asyncio import create_async_engine

from app.events import TIMER_EVENT
from app.jobs.worker import WorkerOptions
from app.sandbox import FakeGitHub
from app.sandbox.ratelimits import cost_of
from app.settings.dburl import async_database_url
from app.store import Store
from app.store.schema import JobStatus, deliveries

ROOT = Path(__file__).resolve().parents[1]
SLUG = "revbot"
BOT = f"{SLUG}[bot]"
SECRET = "bench secret"
WAVE, WAVES = 8, 2  # warm-up reviews per worker process in a wave, waves at most
STOP_WITHIN = 30.0  # seconds a process has to end after SIGTERM before it is killed
# A review starts with its 👀 on the pull request (``usecases.review.review_requested``) and ends with
# its POST: the first and the last of its calls.
MARKS = re.compile(r"/repos/([^/]+/[^/]+)/(?:issues/(\d+)/reactions|pulls/(\d+)/reviews)")
POLL = WorkerOptions().poll_seconds  # an idle worker process claims this often


@dataclass(frozen=True)
class Installation:
    id: int
    name: str
    repo: str
    pulls: int  # the reviews it asks for in the flood


def installations(reviews: int, count: int, big_share: float) -> list[Installation]:
    """The flood's askers: the big one first, every one asking at least once."""
    if reviews < count:
        raise SystemExit(f"--reviews {reviews}: fewer than the {count} installations")
    big = min(max(1, round(reviews * big_share)), reviews - (count - 1))
    small = [(reviews - big) // (count - 1) + (k < (reviews - big) % (count - 1)) for k in range(count - 1)]
    names = ["big", *(f"small-{k + 1}" for k in range(count - 1))]
    return [
        Installation(101 + k, name, f"{name}/widgets", n)
        for k, (name, n) in enumerate(zip(names, [big, *small], strict=True))
    ]


def open_pulls(fake: FakeGitHub, repo: str, count: int, files: int) -> None:
    """``count`` pull requests, each with files of its own (the bot caches analyses of one text)."""
    fake.push(repo, "main", {"README.md": "# bench\n"})
    for n in range(count):
        fake.push(repo, f"b{n}", {path: f"# {repo} {n}\n{body}" for path, body in files_for(files).items()})
        fake.open_pull(repo, head=f"b{n}", author="alice")


@contextlib.asynccontextmanager
async def fresh_database(server_url: str, name: str) -> AsyncIterator[str]:
    """A new, empty database beside the one ``server_url`` names; dropped after, whatever happens."""
    base = make_url(async_database_url(server_url))
    admin = create_async_engine(base, isolation_level="AUTOCOMMIT")
    drop = text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # the processes may still hold it
    try:
        async with admin.connect() as conn:
            await conn.execute(drop)
            await conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        async with admin.connect() as conn:
            await conn.execute(drop)
        await admin.dispose()


@dataclass
class Processes:
    """The processes of one run, each in a session of its own (its analysis children with it), so
    that stopping one reaches all it started and the terminal's Ctrl-C is ours to pass on."""

    logs: Path
    running: list[tuple[str, asyncio.subprocess.Process]] = field(default_factory=list)

    async def start(self, name: str, argv: Sequence[str], env: dict[str, str]) -> None:
        with open(self.logs / f"{name}.log", "ab") as log:  # noqa: ASYNC230 - opened once, before the run
            process = await asyncio.create_subprocess_exec(
                *argv, env=env, cwd=ROOT, stdout=log, stderr=log, start_new_session=True
            )
        self.running.append((name, process))

    def check(self) -> None:
        """Raise if a process has ended: the figures would be of fewer workers than asked."""
        for name, process in self.running:
            if process.returncode is not None:
                tail = (self.logs / f"{name}.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{name} exited with {process.returncode}:\n{tail}")

    async def stop(self) -> None:
        """SIGTERM to each (running jobs are handed back), then SIGKILL to a session still there."""
        for _, process in self.running:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        for _, process in self.running:
            try:
                await asyncio.wait_for(asyncio.shield(process.wait()), STOP_WITHIN)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
        self.running.clear()


async def wait_healthy(port: int, processes: Processes, bound: float = 120.0) -> None:
    deadline = time.monotonic() + bound
    async with aiohttp.ClientSession() as session:
        while True:
            processes.check()
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(f"http://127.0.0.1:{port}/healthz") as answer:
                    if answer.status == 200:
                        return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the door never answered /healthz with 200 within {bound:.0f} s")
            await asyncio.sleep(0.2)


class Watch:
    """When each review started and was posted (the fake's answers, read from its record)."""

    def __init__(self, fake: FakeGitHub) -> None:
        self.fake = fake
        self.posted: dict[tuple[str, int], float] = {}
        self.started: dict[tuple[str, int], float] = {}
        self.posts: Counter[tuple[str, int]] = Counter()  # answered 2xx, each one
        self._seen = 0

    def poll(self) -> None:
        now = time.perf_counter()
        calls = self.fake.calls
        while self._seen < len(calls) and calls[self._seen].status:  # a call is recorded before its answer
            call = calls[self._seen]
            self._seen += 1
            found = MARKS.fullmatch(call.path)
            if call.method == "POST" and found and 200 <= call.status < 300:
                if found.group(2):
                    self.started.setdefault((found.group(1), int(found.group(2))), now)
                else:
                    self.posts[(found.group(1), int(found.group(3)))] += 1
                    self.posted.setdefault((found.group(1), int(found.group(3))), now)

    async def until_posted(self, wanted: set[tuple[str, int]], processes: Processes, within: float) -> None:
        deadline = time.perf_counter() + within
        while not wanted <= self.posted.keys():
            if time.perf_counter() > deadline:
                missing = sorted(wanted - self.posted.keys())
                raise TimeoutError(f"{len(missing)} reviews not posted within {within:.0f} s: {missing[:5]}")
            processes.check()
            await asyncio.sleep(0.01)
            self.poll()


async def quiet(fake: FakeGitHub, store: Store, processes: Processes, within: float) -> None:
    """Until the echoes of the bot's writes are worked: no job waiting, running, or queued and due."""
    d = deliveries.c
    deadline = time.monotonic() + within
    calm = 0
    while calm < 3:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the queue did not settle within {within:.0f} s")
        processes.check()
        await fake.settle(timeout=within)
        busy = or_(
            d.status.in_(("waiting", "running")), and_(d.status == "queued", d.run_after <= time.time())
        )
        async with store.backend.read() as conn:
            calm = calm + 1 if await conn.scalar(select(func.count()).where(busy)) == 0 else 0
        await asyncio.sleep(0.2)


@dataclass
class Result:
    workers: int
    seconds: float  # from the first delivery to the last review posted
    latency: dict[str, list[float]]  # per installation: seconds from delivery to review posted
    waits: dict[str, list[float]]  # per installation, in delivery order: seconds to the review's start
    counted: float  # GitHub calls a review spent of its installation's primary limit
    creates: float  # content-creating calls a review made (GitHub: 80 a minute, 500 an hour)
    refused: int  # 403/429 answers of the fake during the flood
    deferred: int  # the flood's jobs put back for a later turn: an installation's write pace, a limit
    by_worker: list[int]  # the flood's reviews each worker process ran
    not_once: list[str] = field(default_factory=list)  # what says a job ran twice (or not at all)

    def figures(self) -> tuple[int, float, float, float]:
        """Reviews, reviews a minute, and the p50 and p95 seconds from delivery to review."""
        every = [t for times in self.latency.values() for t in times]
        return len(every), 60 * len(every) / self.seconds, percentile(every, 0.5), percentile(every, 0.95)

    def unfair(self, big: str) -> list[str]:
        """Small installations whose first review waited longer than the big one's median, or a poll."""
        limit = max(statistics.median(self.waits[big]), POLL)
        return [f"{name} {w[0]:.1f} s" for name, w in self.waits.items() if name != big and w[0] > limit]


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def ask(fake: FakeGitHub, pulls: Sequence[tuple[str, int]]) -> dict[tuple[str, int], float]:
    """Request the bot's review on each, in order; when the door answered each delivery 2xx."""
    delivered = {}
    for repo, number in pulls:
        status = await fake.request_review(repo, number, SLUG, by="alice")
        if not 200 <= status < 300:
            raise RuntimeError(f"the door answered {status} to the delivery for {repo}#{number}")
        delivered[(repo, number)] = time.perf_counter()
    return delivered


def warm_installations(workers: int) -> list[Installation]:
    """One per worker process, so that no installation of the warm-up nears its write pace."""
    return [Installation(1001 + k, f"warm-{k}", f"warm-{k}/w", WAVE * WAVES) for k in range(workers)]


def numbers(fake: FakeGitHub, repo: str) -> list[int]:
    return [pull.number for pull in fake.world.pulls_of(fake.world.repo(repo))]


async def warm_up(fake: FakeGitHub, store: Store, processes: Processes, workers: int, within: float) -> int:
    """Waves of reviews that fill every worker's 8 slots until each worker process has run one: its
    token minted, its analysis children started. Returns how many workers took part."""
    pulls = {i.repo: numbers(fake, i.repo) for i in warm_installations(workers)}
    watch, took_part = Watch(fake), 0
    for wave in range(WAVES):
        asked = [(repo, numbers[wave * WAVE + k]) for k in range(WAVE) for repo, numbers in pulls.items()]
        await ask(fake, asked)
        await watch.until_posted(set(asked), processes, within)
        await quiet(fake, store, processes, within)
        async with store.backend.read() as conn:
            took_part = int(await conn.scalar(select(func.count(func.distinct(deliveries.c.worker_id)))) or 0)
        if took_part == workers:
            break
    return took_part


def flood_order(plan: Sequence[Installation], fake: FakeGitHub) -> list[tuple[str, int]]:
    """The big installation's whole burst, then the small ones' requests in turn."""
    big, *small = plan
    pulls = {i.repo: numbers(fake, i.repo) for i in plan}
    order = [(big.repo, n) for n in pulls[big.repo]]
    for k in range(max((s.pulls for s in small), default=0)):
        order.extend((s.repo, pulls[s.repo][k]) for s in small if k < s.pulls)
    return order


async def not_once(
    fake: FakeGitHub, store: Store, watch: Watch, asked: Sequence[tuple[str, int]]
) -> list[str]:
    """Each pull request reviewed once (the fake's state, its POSTs), each job ended after one
    attempt (the job table; a readiness timer not due yet aside)."""
    problems = []
    for repo, number in asked:
        pull = fake.world.pull(fake.world.repo(repo), number)
        mine = [r for r in fake.world.reviews_of(pull) if r.user == BOT]
        if len(mine) != 1 or watch.posts[(repo, number)] != 1:
            problems.append(f"{repo}#{number}: {len(mine)} reviews, {watch.posts[(repo, number)]} POSTs")
    now = time.time()
    for job in await store.all_jobs():
        later = job["status"] == JobStatus.QUEUED and job["event"] == TIMER_EVENT and job["run_after"] > now
        ended = job["status"] in (JobStatus.DONE, JobStatus.SKIPPED) and job["attempts"] == 1
        if not (later or ended):
            what = f"{job['status']} after {job['attempts']} attempts"
            problems.append(f"job {job['id']} {job['subject']} {job['event']}: {what}")
    return problems


async def flood(
    fake: FakeGitHub, store: Store, processes: Processes, plan: Sequence[Installation], within: float
) -> Result:
    """The flood, until every review is posted and the queue is quiet; what it took."""
    order = flood_order(plan, fake)
    first_call, watch = len(fake.calls), Watch(fake)
    posted = asyncio.create_task(watch.until_posted(set(order), processes, within))
    try:
        delivered = await ask(fake, order)
        await posted
    finally:
        posted.cancel()
    last = max(watch.posted.values())
    await quiet(fake, store, processes, within)
    calls = [c for c in fake.calls[first_call:] if c.auth == "token"]
    latency = {i.name: [watch.posted[k] - at for k, at in delivered.items() if k[0] == i.repo] for i in plan}
    waits = {i.name: [watch.started[k] - at for k, at in delivered.items() if k[0] == i.repo] for i in plan}
    flooded = deliveries.c.repo.not_like("warm-%")
    async with store.backend.read() as conn:
        rows = await conn.execute(
            select(deliveries.c.worker_id, func.count())
            .where(deliveries.c.action == "review_requested", flooded)
            .group_by(deliveries.c.worker_id)
        )
        by_worker = sorted((int(n) for _, n in rows), reverse=True)
        deferred = await conn.scalar(select(func.count()).where(deliveries.c.error.is_not(None), flooded))
    return Result(
        workers=len(processes.running) - 1,  # all but the door
        seconds=last - min(delivered.values()),
        latency=latency,
        waits=waits,
        counted=sum(c.counted for c in calls) / len(order),
        creates=sum(cost_of(c.method, c.path, mutation=c.is_graphql_mutation).creates_content for c in calls)
        / len(order),
        refused=sum(c.status in (403, 429) for c in fake.calls[first_call:]),
        by_worker=by_worker,
        deferred=int(deferred or 0),
        not_once=await not_once(fake, store, watch, order),
    )


def bench_fake(args: argparse.Namespace, plan: Sequence[Installation], workers: int) -> FakeGitHub:
    """The fake GitHub with every installation's pull requests open, the warm-up's too."""
    fake = FakeGitHub(app_id=1, app_slug=SLUG, webhook_secret=SECRET)  # GitHub's rate limits
    fake.add_user(SLUG)
    if args.latency_ms:
        fake.delay("*", ".*", args.latency_ms / 1000)
    for i in (*warm_installations(workers), *plan):
        fake.add_installation(i.id, i.repo.split("/")[0])
        fake.add_repo(i.repo, installation_id=i.id)
        open_pulls(fake, i.repo, i.pulls, args.files)
    return fake


async def one_run(workers: int, args: argparse.Namespace, server_url: str, logs: Path) -> Result:
    """The door and ``workers`` worker processes on a fresh database; warm-up, then the flood."""
    plan = installations(args.reviews, args.installations, args.big_share)
    fake = bench_fake(args, plan, workers)
    await fake.start()
    (logs / f"{workers}-workers").mkdir(parents=True, exist_ok=True)
    processes = Processes(logs / f"{workers}-workers")
    try:
        async with fresh_database(server_url, f"revbot_scale_{os.getpid()}_{workers}") as url:
            port = free_port()
            fake.webhook_url = f"http://127.0.0.1:{port}/api/github/webhooks"
            env = {
                **os.environ,
                "APP_ID": "1",
                "PRIVATE_KEY": fake.private_key_pem,
                "WEBHOOK_SECRET": SECRET,
                "GITHUB_API_URL": fake.base_url,
                "DATABASE_URL": url,
                "HOST": "127.0.0.1",
                "PORT": str(port),
                "LOG_LEVEL": "warning",
                "READINESS_SETTLE_SECONDS": "86400",  # the reviews' readiness looks come after the run
            }
            store = Store(url)
            try:
                await processes.start("door", [sys.executable, "-m", "app", "serve", "--no-worker"], env)
                await wait_healthy(port, processes)
                for k in range(workers):
                    await processes.start(f"worker-{k + 1}", [sys.executable, "-m", "app", "worker"], env)
                took_part = await warm_up(fake, store, processes, workers, args.timeout)
                if took_part < workers:
                    print(f"  (warm-up reached {took_part} of {workers} worker processes)")
                result = await flood(fake, store, processes, plan, args.timeout)
            finally:
                fake.webhook_url = None  # what is still to be delivered would find the door gone
                await processes.stop()
                await store.close()
    finally:
        await fake.stop()
    return result


def report(result: Result, plan: Sequence[Installation]) -> bool:
    """The run's figures and its two checks; whether both passed."""
    reviews, rate, p50, p95 = result.figures()
    print(
        f"{result.workers} worker process(es): {reviews} reviews in {result.seconds:.1f} s = {rate:.1f} a "
        f"minute; delivery to review p50 {p50:.2f} s, p95 {p95:.2f} s"
    )
    print(
        f"  a review spent {result.counted:.1f} counted calls, {result.creates:.1f} content-creating; "
        f"403/429 answers {result.refused}; jobs deferred {result.deferred}; reviews per worker "
        f"process {result.by_worker}"
    )
    per = [(i.name, result.latency[i.name], result.waits[i.name][0]) for i in plan]
    print(
        "  per installation (reviews: p50/p95 s, its first review's wait s): "
        + ", ".join(
            f"{n} {len(t)}: {percentile(t, 0.5):.1f}/{percentile(t, 0.95):.1f} {w:.1f}" for n, t, w in per
        )
    )
    once = not result.not_once
    print(f"  once: {'PASS' if once else 'FAIL'}" + ("" if once else f" ({'; '.join(result.not_once[:10])})"))
    big = plan[0].name
    unfair = result.unfair(big)
    fair = not unfair
    print(
        f"  fair: {'PASS' if fair else 'FAIL'} (each small installation's first review waited <= "
        f"max({big}'s median wait {statistics.median(result.waits[big]):.1f} s, a poll {POLL:.0f} s)"
        + (")" if fair else f"; over it: {', '.join(unfair)})")
    )
    return once and fair


async def bench(args: argparse.Namespace, server_url: str, logs: Path) -> bool:
    # SIGTERM ends the bench as Ctrl-C does: processes stopped, database dropped
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    plan = installations(args.reviews, args.installations, args.big_share)
    print(
        f"GitHub's answer time {args.latency_ms:.0f} ms a call; {args.reviews} reviews of {args.files}-file "
        f"pull requests a run: {', '.join(f'{i.name} {i.pulls}' for i in plan)} (the big burst first)"
    )
    print("door: python -m app serve --no-worker; workers: python -m app worker (8 slots, 2 children each)")
    results = [await one_run(workers, args, server_url, logs) for workers in args.workers]
    passed = [report(result, plan) for result in results]
    print(f"\n{'workers':>7} {'reviews/min':>11} {'p50 s':>7} {'p95 s':>7} {'counted/review':>14} 403/429")
    for r in results:
        _, rate, p50, p95 = r.figures()
        print(f"{r.workers:>7} {rate:>11.1f} {p50:>7.2f} {p95:>7.2f} {r.counted:>14.1f} {r.refused:>7}")
    return all(passed)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", default="1,2,4", help="worker processes of each run, in turn")
    parser.add_argument("--reviews", type=int, default=40, help="reviews asked in each run's flood")
    parser.add_argument("--installations", type=int, default=4, help="installations asking (the first: most)")
    parser.add_argument("--big-share", type=float, default=0.55, help="the first installation's share")
    parser.add_argument("--files", type=int, default=10, help="Python files per pull request")
    parser.add_argument("--latency-ms", type=float, default=80.0, help="the fake's answer time per call")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a run's reviews may take")
    parser.add_argument("--logs", type=Path, help="keep the processes' logs here (default: discarded)")
    args = parser.parse_args()
    args.workers = [int(n) for n in args.workers.split(",")]
    server_url = os.environ.get("DATABASE_URL_TEST_PG")
    if not server_url:
        print("set DATABASE_URL_TEST_PG: each run creates its own database on that server", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="revbot-scale-") as tmp:
        logs = args.logs or Path(tmp)
        try:
            passed = asyncio.run(bench(args, server_url, logs))
        except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C, SIGTERM
            print("interrupted: every process stopped, every database dropped", file=sys.stderr)
            return 130
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
