"""The execution boundary (issue 18): pull-request content is evaluated in bounded child
processes, and a hostile pull request gets a review that says what its limits cut short.

Through the pool itself (what a child sees, each limit by its own signal), through
``python -m app review --git``, and through ``serve`` against the fake GitHub while the hostile
analysis is held at a gate and other deliveries come in."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import hmac
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path

import aiohttp
import pytest

from app.ops.doctor import check_analysis, isolation_check
from app.review.analyzers import default_analyzers
from app.review.engine.builtin import BuiltinReviewer
from app.review.isolation.limits import Confinement, Limit, Limits, Tripped
from app.review.isolation.pool import ProcessPool
from app.settings.config import load_analysis_settings
from tests.harness import REPO, SECRET, BotHarness, review_checks_completed
from tests.isolation_jobs import (
    Dial,
    Echo,
    Forever,
    Gate,
    Grow,
    LookAround,
    Peek,
    Reached,
    Seen,
    Signal,
    Spin,
    Write,
)

LLM_KEY = "sk-test-llm-key-do-not-leak-1234"
METRICS_TOKEN = "metrics-token-do-not-leak-5678"
A40 = "a" * 40
# Exponential in Python's re for a run of a's with no b (hours at 40); RE2 cannot express the
# look-ahead, so this one runs on the bounded fallback: only the pattern limit ends it.
BACKTRACKING = "^(a+)+(?=b)"
LINEAR = "^(a+)+b"  # the same blow-up in re, linear on RE2


def alias_bomb() -> str:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for level in range(1, 10):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * 9)}]")
    lines.append("exclude: ''\nrepos: *a9")
    return "\n".join(lines) + "\n"


def hostile_configs(pre_commit: str) -> dict[str, str | None]:
    """A repository's own hostile lint configuration (the base: a pull request's is never used)."""
    return {
        "README.md": "# r\n",
        ".pre-commit-config.yaml": pre_commit,
        "pyproject.toml": '[tool.ruff]\nextend = "/proc/self/environ"\n',
        "sub/pyproject.toml": '[tool.ruff]\nextend = "/dev/zero"\n',
    }


HOSTILE_CHANGE: dict[str, str | None] = {
    f"{A40}.py": "import os\n\nvalue = undefined_name\n",
    "sub/m.py": "def f():\n    return missing\n",
}


HOSTILE = {
    "backtracking": (
        f"exclude: '{BACKTRACKING}'\nrepos: []\n",
        "`.pre-commit-config.yaml`: the `exclude` pattern took longer than 0.5 s; "
        "its excludes were not applied",
    ),
    "linear": (f"exclude: '{LINEAR}'\nrepos: []\n", None),
    "alias-bomb": (
        alias_bomb(),
        "`.pre-commit-config.yaml` was not read (its aliases expand to more than 100,000 nodes); "
        "its excludes were not applied",
    ),
}
OUTSIDE = "the ruff setting `extend` does not name a configuration file inside the repository; it was dropped"
DROPPED = [f"`pyproject.toml`: {OUTSIDE}", f"`sub/pyproject.toml`: {OUTSIDE}"]


@pytest.fixture
def secrets_in_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The serving process's environment as a deployment has it."""
    from tests.harness import APP_KEY

    monkeypatch.setenv("WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("PRIVATE_KEY", APP_KEY)
    monkeypatch.setenv("LLM_API_KEY", LLM_KEY)
    monkeypatch.setenv("METRICS_TOKEN", METRICS_TOKEN)
    yield [SECRET, APP_KEY.splitlines()[1], LLM_KEY, METRICS_TOKEN]


@pytest.fixture
async def pool() -> AsyncIterator[ProcessPool]:
    boundary = ProcessPool(
        Limits(workers=1, deadline_seconds=60, cpu_seconds=1, memory_mb=512, pattern_seconds=0.5)
    )
    yield boundary
    boundary.close()


# --- the pool -------------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_child_sees_no_secret_of_the_server_and_lives_in_its_own_directory(
    pool: ProcessPool, secrets_in_environment: list[str]
) -> None:
    seen = await pool.run(LookAround())
    assert not isinstance(seen, Tripped)
    assert set(seen.environ) <= {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "PYTHONDONTWRITEBYTECODE", "PWD"}
    everything = json.dumps(seen.environ) + seen.tool_environ
    assert [s for s in secrets_in_environment if s in everything] == []
    assert seen.environ["HOME"] == seen.environ["TMPDIR"] == seen.cwd
    assert seen.cwd != os.getcwd() and Path(seen.cwd).name.startswith("revbot-analysis-")
    assert seen.limits == {
        "as": 512 * 1024 * 1024,
        "fsize": 64 * 1024 * 1024,
        "nofile": 256,
        "core": 0,
        "cpu": seen.limits["cpu"],
        "pgid_is_pid": 1,
        "nice": min(19, os.getpriority(os.PRIO_PROCESS, 0) + Limits().niceness),  # below the server
    }
    assert seen.limits["cpu"] != -1  # a CPU budget is set for the job


@pytest.mark.slow
async def test_a_child_reaches_no_host_not_even_the_serving_processs_own_ports(pool: ProcessPool) -> None:
    server = await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        assert await Dial(port).run() == "connected"  # from here, the port answers
        isolation = await pool.isolation()
        if not isolation.offline and not os.environ.get("CI"):
            pytest.skip(f"this machine gives no network namespace: {isolation.network_why}")
        assert isolation.offline and isolation.network_why == ""
        assert await pool.run(Dial(port)) == "Network is unreachable"
    finally:
        server.close()
        await server.wait_closed()


def deployment(directory: Path) -> list[Path]:
    """The bot's own files as a deployment keeps them: its private key, ``.env``, the database."""
    from tests.harness import APP_KEY

    directory.mkdir()
    key = directory / "revbot.private-key.pem"
    key.write_text(APP_KEY)
    env = directory / ".env"
    env.write_text(f"WEBHOOK_SECRET={SECRET}\n")
    (directory / "data").mkdir()
    database = directory / "data" / "revbot.sqlite3"
    with contextlib.closing(sqlite3.connect(database)) as db:
        db.execute("create table deliveries (id text)")
        db.commit()
    return [key, env, database, directory / "data"]


@pytest.mark.slow
@pytest.mark.parametrize("strongest", [Confinement.PRIVATE_ROOT, Confinement.LANDLOCK])
async def test_a_child_reads_none_of_the_bots_own_files(tmp_path: Path, strongest: Confinement) -> None:
    """From a child, at the level ``doctor`` reports: the App's key, ``.env``, the database and
    the checkout the bot runs from are unreadable, and the bot's code cannot be changed."""
    import app

    checkout = Path(app.__file__).resolve().parent.parent  # noqa: ASYNC240
    own_files = deployment(tmp_path / "deployment")
    # (The checkout's directory itself may be listed at either level: it is on the import path.)
    wanted = [*own_files, checkout / "pyproject.toml", checkout / "README.md", checkout / ".git"]
    assert all(path.exists() for path in wanted)
    assert await Peek(tuple(map(str, wanted))).run() == Reached(list(map(str, wanted)), [])  # from here
    boundary = ProcessPool(Limits(workers=1), strongest=strongest)
    try:
        isolation = await boundary.isolation()
        if isolation.filesystem is not strongest and not os.environ.get("CI"):
            pytest.skip(f"this machine does not allow {strongest.value}: {isolation.filesystem_why}")
        assert isolation.filesystem is strongest
        assert f"files: {strongest.value}" in isolation_check(isolation).detail  # what doctor says
        seen = await boundary.run(Peek(tuple(map(str, wanted)), (str(Path(app.__file__).parent),)))
    finally:
        boundary.close()
    assert seen == Reached([], [])


@pytest.mark.slow
async def test_doctor_reports_the_confinement_the_children_get() -> None:
    check = await check_analysis(load_analysis_settings({}))
    if "files: none" in check.detail and not os.environ.get("CI"):
        pytest.skip(f"this machine allows neither a private root nor Landlock: {check.detail}")
    assert check.level == "ok"
    assert "files: private-root" in check.detail or "files: landlock" in check.detail


@pytest.mark.slow
async def test_the_deadline_kills_the_child_and_a_new_one_takes_its_place(tmp_path: Path) -> None:
    boundary = ProcessPool(Limits(workers=1, deadline_seconds=0.5))
    try:
        tripped = await boundary.run(Forever())
        assert isinstance(tripped, Tripped) and tripped.limit is Limit.TIME
        assert tripped.note() == "the analysis took longer than 0.5 s; nothing was analysed"
        assert await boundary.run(Echo(7)) == 7
        staged = await boundary.run(Forever(seconds=0.2))  # a stage's own limit, tighter than the job's
        assert (
            isinstance(staged, Tripped)
            and staged.note() == "`waiting` took longer than 0.2 s; it was not done"
        )
        assert await boundary.run(Echo(8)) == 8
    finally:
        boundary.close()


@pytest.mark.slow
async def test_cpu_and_memory_limits_are_answers(pool: ProcessPool) -> None:
    spun = await pool.run(Spin())
    assert isinstance(spun, Tripped) and spun.limit is Limit.CPU
    assert spun.note() == "the analysis used more than 1 s of CPU; nothing was analysed"
    assert await pool.run(Echo(3)) == 3
    # Memory alone: zeroing 512 MB takes CPU time too, more of it on a loaded machine, so the
    # CPU limit here is far beyond it (the test must not depend on how fast the machine is).
    roomy = ProcessPool(Limits(workers=1, deadline_seconds=120, cpu_seconds=60, memory_mb=512))
    try:
        grown = await roomy.run(Grow())
        assert isinstance(grown, Tripped) and grown.limit is Limit.MEMORY
        assert grown.note() == "`growing` needed more than 512 MB of memory; it was not done"
        assert await roomy.run(Echo(3)) == 3
    finally:
        roomy.close()


@pytest.mark.slow
async def test_a_file_over_the_size_limit_is_an_answer() -> None:
    boundary = ProcessPool(Limits(workers=1, file_size_mb=1))
    try:
        tripped = await boundary.run(Write(2))
        assert isinstance(tripped, Tripped) and tripped.limit is Limit.FILE_SIZE
        assert tripped.note() == "`writing` wrote a file larger than 1 MB; it was not done"
        assert await boundary.run(Echo(5)) == 5
    finally:
        boundary.close()


# --- review --git ----------------------------------------------------------------------------


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def committed(
    tmp_path: Path, files: Mapping[str, str | None], base: Mapping[str, str | None] | None = None
) -> Path:
    """A repository whose last commit adds ``files`` to a base of ``base`` (default: a README)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Dev")
    for message, commit in (("base", base or {"README.md": "# r\n"}), ("change", files)):
        for path, text in commit.items():
            assert text is not None
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", message)
    return repo


def hostile_repo(tmp_path: Path, pre_commit: str) -> Path:
    """The hostile configuration on the base (where the rules are read), the change on top."""
    return committed(tmp_path, HOSTILE_CHANGE, base=hostile_configs(pre_commit))


def review_last_commit(repo: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """``python -m app review --git HEAD~1..HEAD`` on ``repo``, as JSON."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "review",
            "--git",
            "HEAD~1..HEAD",
            "--repo",
            str(repo),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=300,
    )


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(HOSTILE))
def test_review_git_on_a_hostile_pull_request_ends_at_its_limits_with_notes(
    tmp_path: Path, variant: str, secrets_in_environment: list[str]
) -> None:
    pre_commit, note = HOSTILE[variant]
    repo = hostile_repo(tmp_path, pre_commit)
    done = review_last_commit(repo, {**os.environ, "REVIEW_PATTERN_SECONDS": "0.5", "REVIEW_WORKERS": "1"})
    assert done.returncode == 1, done.stderr  # the undefined names are blockers: it was reviewed
    result = json.loads(done.stdout)
    notes = result["notes"]
    for dropped in DROPPED:
        assert dropped in notes
    if note is not None:
        assert note in notes
    else:
        assert not any("took longer" in n for n in notes)
    rules = {(f["path"], f["rule"]) for f in result["findings"]}
    assert {(f"{A40}.py", "python/F821"), ("sub/m.py", "python/F821")} <= rules
    assert [s for s in secrets_in_environment if s in done.stdout + done.stderr] == []


# --- serve -----------------------------------------------------------------------------------


async def post_signed(url: str, event: str, payload: dict[str, object], delivery: str) -> int:
    body = json.dumps(payload).encode()
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
        "Content-Type": "application/json",
    }
    timeout = aiohttp.ClientTimeout(total=10)  # GitHub gives a delivery 10 s
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.post(url, data=body, headers=headers) as response,
    ):
        return response.status


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field}")


def reset_peak_rss() -> float:
    """Start counting the peak here (VmHWM back to the current RSS); the RSS it starts from."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_mb("VmRSS")


def peak_rss_growth_mb(since: float) -> float:
    """How far the resident set rose above ``since`` at its peak: what this test's work took,
    whatever the process (a pytest worker, coverage) held before it."""
    return _status_mb("VmHWM") - since


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["backtracking", "alias-bomb"])
async def test_serve_answers_deliveries_while_a_hostile_review_is_held_and_then_posts_its_limits(
    tmp_path: Path, variant: str, secrets_in_environment: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    pre_commit, note = HOSTILE[variant]
    assert note is not None
    gate = tmp_path / "gate"  # the one directory of the test's the confined child sees
    gate.mkdir()
    entered, release = gate / "entered", gate / "release"
    os.mkfifo(entered)
    os.mkfifo(release)
    rss_before = reset_peak_rss()
    bot = BotHarness(tmp_path, env={"LLM_API_KEY": LLM_KEY, "METRICS_TOKEN": METRICS_TOKEN})
    boundary = ProcessPool(Limits(workers=1, pattern_seconds=0.5), readable=(gate,))
    number = bot.open_pull(HOSTILE_CHANGE, base_files=hostile_configs(pre_commit), author="alice")
    await bot.start()
    assert bot.runtime is not None
    bot.runtime.reviewer = BuiltinReviewer(
        [Gate(str(entered), str(release)), *default_analyzers()], boundary=boundary
    )
    try:
        await bot.fake.request_review(REPO, number, "revbot", by="alice")
        await asyncio.wait_for(asyncio.to_thread(entered.read_text), 120)  # the analysis is held
        statuses = [
            await post_signed(
                bot.webhook_url, "ping", {"zen": "Keep it logically awesome.", "hook_id": n}, f"held-{n}"
            )
            for n in range(20)
        ]
        assert all(200 <= status < 300 for status in statuses), statuses
        await asyncio.to_thread(release.write_text, "go")
        await bot.drain(within=300)
    finally:
        with contextlib.suppress(OSError):  # never leave the child waiting on a gate
            os.close(os.open(release, os.O_RDWR | os.O_NONBLOCK))
        await bot.stop()
        boundary.close()

    [review] = [
        c for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/reviews") and c.status == 200
    ]
    body = review.body["body"]
    assert note.replace("`", "") in body.replace("`", "")
    for dropped in DROPPED:
        assert dropped.replace("`", "") in body.replace("`", "")
    assert "undefined_name" in json.dumps(review.body["comments"])  # the rest was reviewed
    [check] = review_checks_completed(bot.fake)
    assert note.replace("`", "")[:40] in json.dumps(check.body).replace("`", "")
    growth = peak_rss_growth_mb(rss_before)
    assert growth < 150, f"{growth:.0f} MB over {rss_before:.0f} MB"  # the bomb in here: over 1 GB

    sent = json.dumps([(c.path, c.body) for c in bot.fake.calls])
    logged = "\n".join(r.getMessage() for r in caplog.records)
    with sqlite3.connect(bot.database_path) as db:
        tables = [t for (t,) in db.execute("select name from sqlite_master where type = 'table'")]
        rows = json.dumps([list(map(str, r)) for t in tables for r in db.execute(f'select * from "{t}"')])
    for secret in secrets_in_environment:
        assert secret not in sent and secret not in logged and secret not in rows


async def test_ruffs_stderr_reaches_neither_the_log_nor_the_review(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from app.review.measure.local import context_from_git

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Dev")
    (repo / "README.md").write_text("# r\n")
    (repo / "ruff.toml").write_text('line-length = "quoted-back-by-ruff-on-stderr"\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "bad config")
    (repo / "m.py").write_text("value = undefined_name\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "change")
    caplog.set_level("DEBUG")
    result = await BuiltinReviewer().review(await context_from_git(repo, "HEAD~1", "HEAD"))
    assert (
        "ruff rejected the repository's configuration (`ruff.toml`); default rules used instead"
        in result.notes
    )
    assert {f.rule for f in result.findings} == {"python/F821"}
    said = json.dumps([result.summary, *result.notes, *(r.getMessage() for r in caplog.records)])
    assert "quoted-back" not in said


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("REVIEW_WORKERS", "0"),
        ("REVIEW_DEADLINE_SECONDS", "-1"),
        ("REVIEW_MEMORY_MB", "12"),
        ("REVIEW_PATTERN_SECONDS", "soon"),
        ("REVIEW_BUDGET_SECONDS", "0"),
        ("REVIEW_RUFF_KEEP", "abc"),
    ],
)
def test_a_bad_analysis_setting_stops_serve_and_review_with_one_line(name: str, value: str) -> None:
    from app.settings.config import ConfigError, load_settings
    from tests.harness import APP_KEY

    with pytest.raises(ConfigError) as raised:
        load_settings({"APP_ID": "1", "PRIVATE_KEY": APP_KEY, "WEBHOOK_SECRET": "s", name: value})
    assert raised.value.setting == name
    done = subprocess.run(
        [sys.executable, "-m", "app", "review", "--git", "HEAD~1..HEAD"],
        capture_output=True,
        text=True,
        env={**os.environ, name: value},
        timeout=120,
    )
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"revbot: configuration error: {name}: ")


@pytest.mark.parametrize("niceness", [0, 7, 19])
async def test_the_children_run_below_the_serving_process_priority(niceness: int) -> None:
    """The webhook door keeps its CPU while reviews run: each child, and what it starts, is
    ``niceness`` below the serving process (nice values stop at 19)."""
    boundary = ProcessPool(Limits(workers=1, niceness=niceness))
    try:
        seen = await boundary.run(LookAround())
    finally:
        boundary.close()
    assert isinstance(seen, Seen)
    assert seen.limits["nice"] == min(19, os.getpriority(os.PRIO_PROCESS, 0) + niceness)


def analysis_children_of(pid: int) -> list[int]:
    """The analysis children whose parent is ``pid``, from /proc (what the scheduler sees). Only
    live ones started from the child module: an earlier test's child may still be exiting, and
    an exiting process reports no group."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after it
            state, parent = stat.read_text().rpartition(")")[2].split()[:2]
            command = (stat.parent / "cmdline").read_bytes().split(b"\0")
            if int(parent) == pid and state not in "ZX" and b"app.review.isolation.child" in command:
                found.append(int(stat.parent.name))
    return found


def autogroup_of(pid: int | str) -> str:
    """``/autogroup-N``; empty for the root group, which the kernel does not name."""
    return "".join(Path(f"/proc/{pid}/autogroup").read_text().split()[:1])  # "/autogroup-N nice K"


@pytest.mark.skipif(not Path("/proc/self/autogroup").exists(), reason="no autogroup scheduling here")
@pytest.mark.skipif(
    Path("/proc/self").resolve().name != str(os.getpid()), reason="/proc is another PID namespace's"
)
async def test_the_children_share_the_serving_processs_scheduling_group() -> None:
    """With autogroup scheduling (most Linux desktops and many servers), a process in a session of
    its own is a group of its own, and groups share the CPU as equals whatever the nice values:
    an analysis child there would take half the door's core. Each child stays in the serving
    process's session, so its lower priority is what the scheduler weighs."""
    boundary = ProcessPool(Limits(workers=2))
    try:
        assert isinstance(await boundary.run(LookAround()), Seen)
        children = analysis_children_of(os.getpid())
        assert children
        assert {autogroup_of(pid) for pid in children} == {autogroup_of("self")}
        assert {os.getsid(pid) for pid in children} == {os.getsid(0)}
        assert all(os.getpgid(pid) == pid for pid in children)  # each its own group, killed as one
    finally:
        boundary.close()


async def test_a_child_can_neither_see_nor_signal_the_serving_process() -> None:
    """In a PID namespace of its own (where the kernel allows one; CI's does), the serving
    process does not exist for the child: a signal to it finds nothing."""
    boundary = ProcessPool(Limits(workers=1))
    try:
        isolation = await boundary.isolation()
        if isolation.processes_why and not os.environ.get("CI"):
            pytest.skip(f"this machine allows no PID namespace: {isolation.processes_why}")
        assert isolation.processes_why == ""
        assert await boundary.run(Signal(os.getpid())) == errno.ESRCH
        assert await boundary.run(Signal(os.getppid())) == errno.ESRCH
    finally:
        boundary.close()
