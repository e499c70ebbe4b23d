"""Benchmark: ``python -m app serve`` against Probot and the bare aiohttp + gidgethub floor, in one
run of the shared harness (``../shared/bench``), on SQLite and on PostgreSQL.

For each database: starts ``python -m app serve`` pinned to CPU 0 (web and worker in one process,
as deployed), runs the shared harness with the floor, Probot and revbot as targets (the harness
pins wrk to CPU 1 and starts/pins the floor and Probot itself), once per connection count, and
after each run checks what the issue asks: every 2xx has its committed row, and the queue is
drained to ``done`` within 10 s after the load stops; then the server's CPU per recorded
delivery, and its RSS after a further 60 s of load (with ``--rss``). Prints the harness's table,
the ratios, and those checks. A script, not a test.

The bot talks to the fake GitHub (``app/sandbox``, on CPU 1 beside wrk), which holds the
payload's repository, installation and pull request: the readiness looks the deliveries cause
are answered, as in production, so a drained queue means every job ran (with GitHub unreachable,
every look would be retried and the pull request's later deliveries would wait behind it).

    cp -r ../shared/bench /tmp/bench && cp -r ../shared/conformance /tmp/conformance
    (cd /tmp/bench && ./setup.sh)
    python bench/compare.py [--databases sqlite postgresql] [--conns 16,64] [--rounds 1] [--rss]
                            [--loops uvloop,asyncio]

PostgreSQL: ``BENCH_DATABASE_URL_PG`` (default: the local server's ``revbot_bench`` database,
which is emptied first).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from webhook_ack import free_port, wait_ready  # this script's directory is on sys.path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from app.sandbox import FakeGitHub  # noqa: E402 - after the project's root is on sys.path

HARNESS = Path(os.environ.get("BENCH_HARNESS", "/tmp/bench"))
PG_URL = os.environ.get("BENCH_DATABASE_URL_PG", "postgresql://revbot:revbot@127.0.0.1:5432/revbot_bench")
PATH = "/api/github/webhooks"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    match = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(match.group(1)) / 1024 if match else float("nan")


COUNT = "SELECT status, count(*) FROM deliveries GROUP BY status"
# The backlog: jobs that could run now and have not. A job due later is not in it: a readiness
# timer, a retry waiting out its backoff (GitHub is unreachable here), and the rows behind it.
BACKLOG = """SELECT 'backlog', count(*) FROM deliveries d WHERE d.status = 'running'
 OR (d.status = 'queued' AND d.run_after <= {now})
 OR (d.status = 'waiting' AND NOT EXISTS (SELECT 1 FROM deliveries h WHERE h.subject = d.subject
     AND h.status = 'queued' AND h.run_after > {now}))"""


def counts(url: str, query: str = COUNT) -> dict[str, int]:
    """Rows per status, read with the databases' own clients (no driver needed here)."""
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            return {status: int(n) for status, n in db.execute(query)}
    out = subprocess.run(["psql", url, "-Atc", query], capture_output=True, text=True, check=True).stdout
    return {status: int(n) for status, n in (line.split("|") for line in out.splitlines() if line)}


def backlog_of(url: str) -> int:
    return counts(url, BACKLOG.format(now=time.time()))["backlog"]


def reset_postgres(url: str) -> None:
    admin = url.rsplit("/", 1)[0] + "/postgres"
    name = url.rsplit("/", 1)[1]
    subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name}"], check=True)
    subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {name}"], check=True)


@contextmanager
def fake_github(payload: Path) -> Iterator[FakeGitHub]:
    """The fake GitHub, serving from a thread of its own, with what the payload names."""
    delivered = json.loads(payload.read_bytes())
    repo = delivered["repository"]["full_name"]
    pull = delivered["pull_request"]
    fake = FakeGitHub(app_id=1, app_slug="revbot", webhook_secret="bench-secret")
    fake.add_installation(delivered["installation"]["id"], repo.split("/")[0])
    fake.add_repo(repo, installation_id=delivered["installation"]["id"], default_branch=pull["base"]["ref"])
    fake.push(repo, pull["base"]["ref"], {"README.md": "# bench\n"})
    fake.push(repo, pull["head"]["ref"], {"README.md": "# bench\n", "src/bench.py": "x = 1\n"})
    base, head, author = pull["base"]["ref"], pull["head"]["ref"], pull["user"]["login"]
    for n in range(1, pull["number"]):  # pull requests before it, so that it has its number
        fake.push(repo, f"{head}-{n}", {"README.md": f"# bench {n}\n"})
        fake.open_pull(repo, head=f"{head}-{n}", base=base, author=author)
    assert fake.open_pull(repo, head=head, base=base, author=author)["number"] == pull["number"]
    loop = asyncio.new_event_loop()
    asyncio.run_coroutine_threadsafe(fake.start(), loop)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        while fake.base_url.endswith(":0"):
            time.sleep(0.01)
        yield fake
    finally:
        asyncio.run_coroutine_threadsafe(fake.stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)


def run(database: str, rnd: int, args: argparse.Namespace, fake: FakeGitHub, work: Path, loop: str) -> None:
    """One round: a fresh revbot (empty database, idle while the floor and Probot are loaded) on
    the event loop ``loop`` (``EVENT_LOOP``)."""
    port = free_port()
    if database == "sqlite":
        url = f"sqlite:///{work / f'bench-{rnd}-{loop}.sqlite3'}"
    else:
        url = PG_URL
        reset_postgres(url)
    env = {
        **os.environ,
        "APP_ID": "1",
        "PRIVATE_KEY": fake.private_key_pem,
        "WEBHOOK_SECRET": "bench-secret",
        "APP_SLUG": "revbot",
        "GITHUB_API_URL": fake.base_url,
        "DATABASE_URL": url,
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "LOG_LEVEL": "warning",
        "EVENT_LOOP": loop,
    }
    server = subprocess.Popen(
        ["taskset", "-c", "0", sys.executable, "-m", "app", "serve"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(work / f"serve-{database}.log", "wb"),  # noqa: SIM115 - lives as long as the server
    )
    try:
        wait_ready(f"http://127.0.0.1:{port}/healthz")
        # One harness run per connection count, so that the queue's drain is timed after each
        # load (the issue's target: drained within 10 s after the load stops).
        for conns in args.conns.split(","):
            load_and_drain(database, f"{database} [{loop}] round {rnd}", url, port, conns, server.pid)
        if args.rss and rnd == args.rounds:
            subprocess.run(
                ["taskset", "-c", "1", "wrk", "-t2", "-c64", "-d60s", "-s", str(HARNESS / "post_webhook.lua"),
                 f"http://127.0.0.1:{port}{PATH}", "--", str(HARNESS / ".work/payload.json"),
                 str(HARNESS / ".work/payload.sig"), os.urandom(4).hex()],
                capture_output=True, check=True,
            )  # fmt: skip
            rss = rss_mb(server.pid)
            print(f"{database} [{loop}] round {rnd}: RSS after 60 s more load at c64: {rss:.0f} MB")
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()


def load_and_drain(database: str, label: str, url: str, port: int, conns: str, pid: int) -> None:
    rows_before = sum(counts(url).values())
    cpu_before = cpu_seconds(pid)
    harness = subprocess.run(
        [
            str(HARNESS / "run_webhook_bench.py"),
            "--targets",
            "floor,probot",
            "--target",
            f"revbot-{database}=http://127.0.0.1:{port}{PATH}",
            "--conns",
            conns,
        ],
        cwd=HARNESS,
        capture_output=True,
        text=True,
        check=True,
    )
    stopped = time.monotonic()
    print(harness.stdout)
    table = [line for line in harness.stdout.splitlines() if line.startswith("| ") and "round" not in line]
    backlog = backlog_of(url)
    drained = "NOT within 60 s"
    while time.monotonic() - stopped < 60:
        if not backlog_of(url):
            drained = f"in {time.monotonic() - stopped:.1f} s"
            break
        time.sleep(0.1)
    cpu = cpu_seconds(pid) - cpu_before
    status = counts(url)
    recorded = sum(status.values()) - rows_before
    logdir = re.search(r"logs: (\S+)", harness.stdout)
    answered = 0
    if logdir:
        for raw in Path(logdir.group(1)).glob(f"revbot-{database}-c*.txt"):
            bench = re.search(r"BENCH requests=(\d+) \S+ non2xx=(\d+)", raw.read_text())
            if bench:
                answered += int(bench.group(1)) - int(bench.group(2))
    summarise(database, label, table, conns)
    print(
        f"{label} c{conns}: {recorded} rows for {answered} 2xx in the measured run "
        "(+ warm-up): "
        f"{'every 2xx has its row' if recorded >= answered else 'MISSING ROWS'}; statuses {status}; "
        f"{backlog} jobs left when the load stopped, queue drained {drained}; "
        f"server CPU {cpu * 1e6 / max(recorded, 1):.0f} us per recorded delivery (web + worker)"
    )


def summarise(database: str, label: str, table: list[str], conns: str) -> None:
    """Ratios within each round: revbot against Probot (req/s) and against the floor (p99)."""
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in table]
    for c in conns.split(","):
        by_target = {row[1]: row for row in cells if row[3] == c}
        ours, probot, floor = (by_target.get(n) for n in (f"revbot-{database}", "probot", "floor"))
        if not (ours and probot and floor):
            continue
        rps = float(ours[4]) / float(probot[4])
        p99 = float(ours[7]) / float(floor[7])
        print(
            f"{label} c{c}: {float(ours[4]):.0f} req/s = {rps:.2f}x Probot "
            f"({float(probot[4]):.0f}), p99 {ours[7]} ms = {p99:.2f}x the floor's ({floor[7]} ms), "
            f"non-2xx {ours[8]}"
        )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--databases", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--conns", default="16,64")
    parser.add_argument("--rounds", type=int, default=1, help="each with a fresh revbot and database")
    parser.add_argument("--rss", action="store_true", help="then load 60 s more and report RSS")
    parser.add_argument(
        "--loops", default="auto", help="EVENT_LOOP values, comma list: a fresh revbot (and run) each"
    )
    args = parser.parse_args()
    if not (HARNESS / "run_webhook_bench.py").exists() or not (HARNESS / ".work" / "payload.json").exists():
        print(f"needs the shared harness set up in {HARNESS} (see this script's docstring)", file=sys.stderr)
        return 2
    os.sched_setaffinity(0, {1})  # the fake GitHub shares wrk's core, never the bot's
    with (
        tempfile.TemporaryDirectory(prefix="revbot-compare-") as tmp,
        fake_github(HARNESS / ".work" / "payload.json") as fake,
    ):
        for database in args.databases:
            for rnd in range(1, args.rounds + 1):
                for loop in args.loops.split(","):
                    run(database, rnd, args, fake, Path(tmp), loop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
