"""The stories ``python -m app demo`` plays, and the driver that runs one.

Every story acts as the humans (and as GitHub) through the fake's helpers, waits for the bot to
settle, and lets the narrator print what the bot did, read from the fake's records. Scenarios:

- ``story`` (default): a defective PR reviewed, fixes claimed, threads resolved, then approved
  (or, with ``--no-approve``, the block dismissed and a comment review posted).
- ``mention``: ``@revbot review`` by the author, a stranger refused once, ``@revbot help``.
- ``big-pr``: a 250-file PR reviewed; API calls and time.
- ``redelivery``: one delivery id sent twice; the second is answered 200 and does nothing.
- ``crash-recovery``: the worker process is killed mid-review and a new one finishes the job.
- ``ready``: readiness followed to the end: reviewed, fixed, CI red then green, approved, a
  quiet window (three seconds here), and the bot's "looks merge-ready" call in one sticky comment
  and a check run. It never merges.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ..logs import setup_logging
from ..sandbox import Call, FakeGitHub
from ..sandbox.state import Pull
from . import html
from .harness import SLUG
from .measure import echo_report
from .runner import BOT, DECOY, READINESS_OFF_STAGE, REPO, Stage
from .timeline import Narrator, StepTally, Timeline, short

SCENARIOS = ("story", "mention", "big-pr", "redelivery", "crash-recovery", "ready")

CRASH_DELAY = 3.0
READY_SETTLE = 0.3  # seconds: a burst of events is looked at together, this long after the first
READY_CONFIG = "readiness:\n  quiet_minutes: 0.05\n"  # a three-second quiet window for the demo
READY_BROKEN: dict[str, str | None] = {
    "src/app.py": "def handler(request):\n    return render(request) + 1\n"
}
READY_FIXED: dict[str, str | None] = {"src/app.py": "def handler(request):\n    return len(request) + 1\n"}
AUTHOR = "alice"
STRANGER = "mallory"

BASE_FILES: dict[str, str | None] = {
    "README.md": "# widgets\n\nSmall widgets for everyone.\n",
    "src/__init__.py": "",
}
KEY_HEADER = "-----BEGIN RSA PRIVATE KEY-----"
DEFECTIVE: dict[str, str | None] = {
    # line 3: a syntax error
    "src/parser.py": "import re\n\ndef parse(text:\n    return re.split(',', text)\n",
    # line 5: an undefined name; line 9: a breakpoint left in
    "src/app.py": (
        "import os\n\n\ndef handler(request):\n    return render(request) + 1\n\n\n"
        "def debug():\n    breakpoint()\n    return os.getcwd()\n"
    ),
    # line 1: a leaked private key
    "deploy/key.pem": f"{KEY_HEADER}\nMIIEowIBAAKCAQEAx0a\n-----END RSA PRIVATE KEY-----\n",
    # line 4: a merge conflict marker left in
    "README.md": (
        "# widgets\n\nSmall widgets for everyone.\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> feature\n"
    ),
}
PARTIAL_FIX: dict[str, str | None] = {
    "src/app.py": (
        "import os\n\n\ndef handler(request):\n    return len(request) + 1\n\n\n"
        "def debug():\n    breakpoint()\n    return os.getcwd()\n"
    ),
}
FULL_FIX: dict[str, str | None] = {
    "src/parser.py": "import re\n\n\ndef parse(text):\n    return re.split(',', text)\n",
    "src/app.py": (
        "import os\n\n\ndef handler(request):\n    return len(request) + 1\n\n\n"
        "def cwd():\n    return os.getcwd()\n"
    ),
    "deploy/key.pem": None,
    "README.md": "# widgets\n\nSmall widgets for everyone.\n",
}


@dataclass
class DemoOptions:
    scenario: str = "story"
    approve: bool = True
    html: Path | None = None
    workdir: Path | None = None
    color: bool | None = None  # None: colours only when stdout is a terminal


class Show:
    """What a story needs: the stage (fake + bot), the timeline, and the narrator."""

    def __init__(self, stage: Stage, timeline: Timeline, narrator: Narrator, options: DemoOptions) -> None:
        self.stage = stage
        self.fake: FakeGitHub = stage.fake
        self.timeline = timeline
        self.narrator = narrator
        self.options = options
        self.number = 0  # the pull request the story is about (for the HTML page)
        self.pushes: list[tuple[int, str]] = []

    def human(self, who: str, text: str) -> None:
        self.narrator.poll()
        self.timeline.say(who, text, kind="human")

    def github(self, text: str, *, style: str | None = None) -> None:
        self.narrator.poll()
        self.timeline.say("GitHub", text, kind="github", style=style)

    def demo(self, text: str, *, style: str | None = None, at: float | None = None) -> None:
        if not self.narrator.paused:
            self.narrator.poll()
        self.timeline.say("demo", text, kind="demo", style=style, at=at)

    async def settle(self, within: float = 15.0) -> StepTally:
        """Wait until the bot is idle again; the step's tally of reads, writes and echoes."""
        await self.stage.drain(within)
        return self.narrator.end_step()

    async def request_review(self, number: int, *, by: str, again: bool = False) -> None:
        requested = [*self.pull(number).requested_reviewers, DECOY]
        word = " again" if again else ""
        self.human(by, f"requested a review from {DECOY}{word} (requested reviewers: {', '.join(requested)})")
        await self.fake.request_review(REPO, number, DECOY, by=by)

    # ---------------------------------------------------------------- reading the fake
    def pull(self, number: int) -> Pull:
        world = self.fake.world
        return world.pull(world.repo(REPO), number)

    def pr_state(self, number: int) -> str:
        pull = self.pull(number)
        decision = self.fake.review_decision(REPO, number) or "none"
        requested = ", ".join(pull.requested_reviewers) or "nobody"
        threads = self.fake.threads(REPO, number)
        resolved = sum(t["is_resolved"] for t in threads)
        runs = [r for r in self.fake.world.check_runs.values() if r.head_sha == pull.head_sha]
        checks = ", ".join(f'"{r.name}" {r.conclusion or r.status}' for r in runs) or "none"
        return (
            f"PR #{number} at {short(pull.head_sha)}: review decision {decision}; "
            f"requested reviewers: {requested}; threads resolved {resolved}/{len(threads)}; checks: {checks}"
        )

    def bot_thread(self, number: int, path: str, rule: str) -> tuple[int, str]:
        """The bot's comment that opened the thread about ``rule`` in ``path``, and its place."""
        world = self.fake.world
        for thread in world.threads_of(self.pull(number)):
            root = world.review_comments[thread.comment_ids[0]]
            if root.user == BOT and root.path == path and rule in root.body:
                return root.id, f"{root.path}:{root.original_line}"
        raise LookupError(f"the bot has no thread about {rule} in {path}")

    def push(self, files: dict[str, str | None], message: str) -> None:
        """The author pushes to the PR's branch (remembered for the HTML page's timeline)."""
        world = self.fake.world
        newest = max([0, *world.reviews, *world.review_comments, *world.issue_comments])
        sha = self.fake.push(REPO, "feature", files, message=message)
        self.pushes.append((newest, sha))

    def reviews_posted(self) -> list[Call]:
        return [
            c
            for c in self.fake.calls
            if c.method == "POST" and c.path.endswith("/reviews") and 200 <= c.status < 300
        ]


# ------------------------------------------------------------------------------------- stories
async def story(show: Show) -> None:
    fake = show.fake
    show.timeline.heading("A pull request with real defects")
    number = show.stage.open_pull(
        DEFECTIVE,
        base_files=BASE_FILES,
        author=AUTHOR,
        title="Add the request handler",
        body="Adds the handler, a parser and the deploy key.",
        notify=True,
    )
    show.number = number
    files = ", ".join(sorted(DEFECTIVE))
    show.human(AUTHOR, f'opened PR #{number} "Add the request handler" ({len(DEFECTIVE)} files: {files})')
    await show.settle()

    show.timeline.heading("Review requested from the decoy")
    await show.request_review(number, by=AUTHOR)
    await show.settle()
    show.github(show.pr_state(number))

    show.timeline.heading("A partial fix, and two claims of a fix")
    fixed_root, fixed_place = show.bot_thread(number, "src/app.py", "python/F821")
    open_root, open_place = show.bot_thread(number, "src/app.py", "debug/breakpoint")
    show.human(AUTHOR, "pushed a partial fix: the undefined name in src/app.py (the breakpoint stays)")
    show.push(PARTIAL_FIX, "Fix the undefined name")
    show.human(AUTHOR, f'replied "fixed" in the thread on {fixed_place}')
    await fake.reply(REPO, number, fixed_root, "fixed", by=AUTHOR)
    show.human(AUTHOR, f'replied "fixed" in the thread on {open_place}')
    await fake.reply(REPO, number, open_root, "fixed", by=AUTHOR)
    await show.settle()
    show.github(show.pr_state(number))

    show.timeline.heading("Everything fixed, review requested again")
    show.human(AUTHOR, "pushed the rest of the fixes (parser, breakpoint, key removed, conflict resolved)")
    show.push(FULL_FIX, "Fix the rest")
    await show.settle()
    await show.request_review(number, by=AUTHOR, again=True)
    await show.settle()
    show.github(show.pr_state(number))


async def mention(show: Show) -> None:
    fake = show.fake
    show.timeline.heading("Asking by mention")
    number = show.stage.open_pull(
        DEFECTIVE, base_files=BASE_FILES, author=AUTHOR, title="Add the request handler"
    )
    show.number = number
    show.human(AUTHOR, f'opened PR #{number} "Add the request handler"')
    show.human(AUTHOR, 'commented "@revbot review"')
    await fake.comment(REPO, number, "@revbot review", by=AUTHOR)
    await show.settle()
    show.github(show.pr_state(number))

    show.timeline.heading("A stranger asks, twice")
    show.human(STRANGER, 'commented "@revbot review" (author association NONE)')
    await fake.comment(REPO, number, "@revbot review", by=STRANGER, author_association="NONE")
    await show.settle()
    show.human(STRANGER, 'commented "@revbot review please!!" (author association NONE)')
    await fake.comment(REPO, number, "@revbot review please!!", by=STRANGER, author_association="NONE")
    await show.settle()
    refusals = [
        c
        for c in fake.calls
        if c.method == "POST"
        and c.path == f"/repos/{REPO}/issues/{number}/comments"
        and f"@{STRANGER}" in str((c.body or {}).get("body"))
    ]
    show.demo(f"refusals posted to {STRANGER}: {len(refusals)} (one polite answer, then silence)")

    show.timeline.heading("Help")
    show.human(AUTHOR, 'commented "@revbot help"')
    await fake.comment(REPO, number, "@revbot help", by=AUTHOR)
    await show.settle()
    show.demo(f"reviews posted: {len(show.reviews_posted())} (only the author's request was a review)")


async def big_pr(show: Show) -> None:
    fake = show.fake
    show.timeline.heading("A 250-file pull request")
    files: dict[str, str | None] = {f"pkg/mod_{n:03}.py": f"VALUE = {n}\n" for n in range(250)}
    files["pkg/mod_240.py"] = "VALUE = missing_name\n"
    number = show.stage.open_pull(files, base_files=BASE_FILES, author=AUTHOR, title="Generate 250 modules")
    show.number = number
    show.human(AUTHOR, f'opened PR #{number} "Generate 250 modules" (250 files, one with an undefined name)')
    first_call = len(fake.calls)
    started = time.monotonic()
    await show.request_review(number, by=AUTHOR)
    await show.settle(within=25)
    took = time.monotonic() - started
    calls = [c for c in fake.calls[first_call:] if c.auth is not None]
    kinds: Counter[str] = Counter()
    for call in calls:
        if call.path == "/graphql":
            kinds["graphql"] += 1
        elif call.path.endswith("/access_tokens"):
            kinds["token"] += 1
        else:
            kinds[call.method] += 1
    pages = [c for c in calls if c.path == f"/repos/{REPO}/pulls/{number}/files"]
    detail = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    show.demo(f"API calls for the review: {len(calls)} ({detail}); file list pages read: {len(pages)}")
    show.demo(f"time from the request to the bot settling: {took:.2f}s")
    show.github(show.pr_state(number))


async def redelivery(show: Show) -> None:
    fake = show.fake
    show.timeline.heading("One delivery, sent twice")
    number = show.stage.open_pull(
        DEFECTIVE, base_files=BASE_FILES, author=AUTHOR, title="Add the request handler"
    )
    show.number = number
    show.human(AUTHOR, f'opened PR #{number} and commented "@revbot review"')
    sent_before = len(fake.webhooks_sent)
    await fake.comment(REPO, number, "@revbot review", by=AUTHOR)
    await show.settle()
    event, delivery_id, payload, status = fake.webhooks_sent[sent_before]
    writes_before = len(fake.writes())
    show.github(f"redelivers {event}.{payload.get('action')} with the same delivery id {delivery_id}")
    again = await fake.send_webhook(event, payload, delivery_id=delivery_id)
    await show.settle()
    show.demo(f"first delivery answered {status}, the redelivery answered {again}")
    show.demo(f"writes by the bot after the redelivery: {len(fake.writes()) - writes_before}")
    row = await show.stage.store.delivery(delivery_id)
    if row is not None:
        shown = {k: row[k] for k in ("id", "delivery_id", "event", "action", "subject", "status", "attempts")}
        shown["done_handlers"] = row["done_handlers"]
        show.demo("the ledger row (one per delivery id, ever):")
        for key, value in shown.items():
            show.timeline.more(f"{key:>14}: {value}", indent=2)
    rows = [r for r in await show.stage.store.all_jobs() if r["delivery_id"] == delivery_id]
    show.demo(f"ledger rows with this delivery id: {len(rows)}; reviews posted: {len(show.reviews_posted())}")


async def crash_recovery(show: Show) -> None:
    fake, stage = show.fake, show.stage
    show.timeline.heading("The worker dies mid-review")
    number = stage.open_pull(DEFECTIVE, base_files=BASE_FILES, author=AUTHOR, title="Add the request handler")
    show.number = number
    files_path = f"/repos/{REPO}/pulls/{number}/files"
    worker = await stage.start_worker_process(stage.workdir / "worker-1.log")
    show.demo(f"worker process 1 started (pid {worker.pid}, lease 2 s); the web process runs no worker")
    fake.delay("GET", files_path, CRASH_DELAY)
    show.demo(f"GitHub will take {CRASH_DELAY:.0f} s to answer GET {files_path}, which the review needs")
    await show.request_review(number, by=AUTHOR)
    deadline = time.monotonic() + 15
    while not [c for c in fake.calls if c.path == files_path]:
        if time.monotonic() > deadline or worker.returncode is not None:
            raise RuntimeError("the worker process never started the review")
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    [job] = [
        r
        for r in await stage.store.all_jobs()
        if (r["event"], r["action"]) == ("pull_request", "review_requested")
    ]
    show.demo(
        f"job {job['id']} ({job['event']}.{job['action']}): {job['status']}, attempt {job['attempts']}, "
        f"waiting for GET {files_path}"
    )
    worker.send_signal(signal.SIGKILL)
    await worker.wait()
    killed_at = time.time()
    show.demo(
        f"worker process 1 killed with SIGKILL mid-review (exit status {worker.returncode})", style="bad"
    )
    row = await stage.store.job(job["id"])
    show.demo(
        f"job {row['id']}: still {row['status']} under the dead worker's lease, which expires in "
        f"{max(0.0, float(row['lease_until']) - killed_at):.1f}s"
    )
    fake.clear_delays()
    worker = await stage.start_worker_process(stage.workdir / "worker-2.log")
    show.demo(f"worker process 2 started (pid {worker.pid})")
    try:
        deadline = time.monotonic() + 20
        show.narrator.paused = True  # hold the bot's lines until the claim is shown, in order
        try:
            while (row := await stage.store.job(job["id"]))["attempts"] < 2:
                if time.monotonic() > deadline:
                    raise RuntimeError("no worker claimed the job again")
                await asyncio.sleep(0.01)
            show.demo(
                f"worker process 2 claimed job {row['id']} after the lease expired: "
                f"attempt {row['attempts']}, worker {row['worker_id']}",
                at=float(row["updated_at"]),
            )
        finally:
            show.narrator.paused = False
        while (row := await stage.store.job(job["id"]))["status"] != "done":
            if time.monotonic() > deadline:
                raise RuntimeError(f"the job was not finished: {row['status']}")
            await asyncio.sleep(0.05)
        await show.settle(within=20)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(worker.wait(), 25)
        except TimeoutError:
            worker.kill()
            await worker.wait()
    redone = await stage.store.job(job["id"])
    show.demo(f"job {redone['id']}: status {redone['status']}, attempts {redone['attempts']}")
    posted = show.reviews_posted()
    show.demo(
        f"reviews posted: {len(posted)}; check runs for the head: {_check_runs(show, number)}; "
        f"reactions on the PR: {_reactions(show, number)}"
    )
    show.github(show.pr_state(number))


async def ready(show: Show) -> None:
    fake = show.fake
    show.timeline.heading("A pull request the bot will follow to the end")
    number = show.stage.open_pull(
        READY_BROKEN,
        base_files={**BASE_FILES, ".github/revbot.yml": READY_CONFIG},
        author=AUTHOR,
        title="Add the request handler",
        notify=True,
    )
    show.number = number
    show.human(AUTHOR, f"opened PR #{number}; .github/revbot.yml sets readiness.quiet_minutes: 0.05")
    await show.request_review(number, by=AUTHOR)
    await show.settle()
    await _readiness(show, number, "⛔")

    show.timeline.heading("Fixed and reviewed again; CI runs red")
    show.push(READY_FIXED, "Fix the undefined name")
    head = show.pull(number).head_sha
    show.human(AUTHOR, f"pushed the fix ({short(head)})")
    await show.settle()
    await show.request_review(number, by=AUTHOR, again=True)
    await show.settle()
    # One workflow's two jobs: both exist before the bot hears of either.
    tests, lint = await fake.start_check_runs(REPO, head, ["tests", "lint"], app="actions")
    show.github('GitHub Actions started "tests" and "lint"')
    await _readiness(show, number, "⏳ Waiting — check(s) still running")
    await fake.complete_check_run(REPO, lint, "success")
    await fake.complete_check_run(REPO, tests, "failure")
    show.github('"tests" failed, "lint" passed')
    await _readiness(show, number, "⛔ Blocked — failing check(s): `tests`")

    show.timeline.heading("The test fixed, CI green, a quiet window")
    show.push({"tests/test_app.py": "def test_handler():\n    assert True\n"}, "Fix the test")
    head = show.pull(number).head_sha
    show.human(AUTHOR, f"pushed a fix for the failing test ({short(head)})")
    for name in ("tests", "lint"):
        run_id = await fake.start_check_run(REPO, head, name, app="actions")
        await fake.complete_check_run(REPO, run_id, "success")
    show.github('"tests" and "lint" passed')
    await _readiness(show, number, "⏳ Waiting — a quiet window")
    show.demo("quiet window: 3 s here (10 min by default); the look at its end is a row of the durable queue")
    await _readiness(show, number, "✅", within=30.0)
    name = f"{SLUG} readiness"
    check = next(r for r in fake.world.check_runs.values() if r.name == name and r.head_sha == head)
    show.github(f'check run "{check.name}": {check.conclusion}; nothing merged (the bot never merges)')


async def _readiness(show: Show, number: int, prefix: str, *, within: float = 15.0) -> None:
    """Wait for the bot's readiness check run to say ``prefix`` (its looks are timers in the
    queue, so the bot is idle in between), then show it, and whether the comment said it too
    (only when someone must act: ``readiness.comment``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        await show.stage.drain(within)
        headline = _readiness_title(show, number)
        if headline is not None and headline.startswith(prefix):
            if _readiness_headline(show, number) == headline:
                show.github(f"readiness check run and comment: {headline}")
            else:
                show.github(f"readiness check run (no comment: nobody needs to act): {headline}")
            return
        if loop.time() > deadline:
            raise TimeoutError(f"the readiness check run never said {prefix!r} (it says {headline!r})")
        await asyncio.sleep(0.05)


def _readiness_title(show: Show, number: int) -> str | None:
    head = show.pull(number).head_sha
    name = f"{SLUG} readiness"
    runs = [r for r in show.fake.world.check_runs.values() if r.name == name and r.head_sha == head]
    return runs[-1].title if runs else None


def _readiness_headline(show: Show, number: int) -> str | None:
    world = show.fake.world
    for comment in world.issue_comments_of(world.repo(REPO), number):
        if comment.user == BOT and "<!-- revbot:readiness " in comment.body:
            return comment.body.split("\n", 1)[0]
    return None


def _reactions(show: Show, number: int) -> int:
    return sum(1 for r in show.fake.world.reactions if r.subject == ("issue", number))


def _check_runs(show: Show, number: int) -> int:
    head = show.pull(number).head_sha
    return sum(1 for r in show.fake.world.check_runs.values() if r.head_sha == head)


STORIES: dict[str, Callable[[Show], Awaitable[None]]] = {
    "story": story,
    "mention": mention,
    "big-pr": big_pr,
    "redelivery": redelivery,
    "crash-recovery": crash_recovery,
    "ready": ready,
}


# ------------------------------------------------------------------------------------- driver
async def _play(options: DemoOptions, stage: Stage, timeline: Timeline) -> str | None:
    """Play the scenario; the HTML page, when asked for."""
    narrator = Narrator(timeline, stage.fake, bot_login=BOT)
    show = Show(stage, timeline, narrator, options)
    page = None
    await stage.start()
    try:
        mode = "approval on" if options.approve else "REVIEW_APPROVE=false"
        timeline.say("demo", f"fake GitHub at {stage.fake.base_url} ({REPO}, App {BOT})", kind="demo")
        worker = "in-process worker" if stage.run_worker else "no worker (separate worker processes)"
        timeline.say("demo", f"bot (Runtime, {worker}, {mode}) listening at {stage.webhook_url}", kind="demo")
        narrator.start()
        await STORIES[options.scenario](show)
        await stage.drain()
        await narrator.stop()
        report = await echo_report(stage.store, stage.webhooks, stage.calls, BOT)
        timeline.heading("Echoes")
        for index, line in enumerate(report.lines(BOT)):
            if index == 0:
                timeline.say("demo", line, kind="demo")
            else:
                timeline.more(line.strip(), indent=2)
        if options.html is not None and show.number:
            page = html.render_pull(stage.fake, REPO, show.number, bot_login=BOT, pushes=show.pushes)
    finally:
        await narrator.stop()
        await stage.stop()
    return page


def run_demo(options: DemoOptions, out: TextIO | None = None) -> int:
    """Play ``options.scenario``; 0 when it ran to the end. The temp dir is kept and printed."""
    if options.scenario not in STORIES:
        raise ValueError(f"unknown scenario {options.scenario!r}; choose one of {', '.join(SCENARIOS)}")
    timeline = Timeline(out or sys.stdout, color=options.color)
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="revbot-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    html_path = options.html.resolve() if options.html is not None else None
    settle = {"ready": READY_SETTLE}.get(options.scenario, READINESS_OFF_STAGE)
    stage = Stage(
        workdir,
        approve=options.approve,
        run_worker=options.scenario != "crash-recovery",
        readiness_settle=settle,
    )
    root = logging.getLogger()
    with (workdir / "revbot.log").open("a", encoding="utf-8", buffering=1) as log_stream:
        setup_logging(logging.INFO, stream=log_stream, json_lines=True)
        try:
            page = asyncio.run(_play(options, stage, timeline))
        except Exception as exc:
            logging.getLogger(__name__).exception("demo failed")
            message = f"revbot demo: the {options.scenario} scenario failed: {type(exc).__name__}: {exc}"
            print(message, file=sys.stderr)
            print(f"revbot demo: logs and database kept in {workdir}", file=sys.stderr)
            return 1
        finally:
            for handler in list(root.handlers):
                root.removeHandler(handler)
                with contextlib.suppress(Exception):
                    handler.close()
    if html_path is not None and page is not None:
        html_path.write_text(page, encoding="utf-8")
    timeline.heading("Done")
    timeline.plain(f"scenario {options.scenario} finished in {timeline.elapsed():.2f}s")
    timeline.plain(f"database: {stage.database_path}")
    timeline.plain(f"logs:     {workdir / 'revbot.log'} (JSON lines)")
    for extra in sorted(workdir.glob("worker-*.log")):
        timeline.plain(f"          {extra}")
    if html_path is not None:
        timeline.plain(f"html:     {html_path}")
    timeline.plain(f"temp dir: {workdir} (kept)")
    return 0
