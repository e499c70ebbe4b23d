"""The stories ``python -m app demo`` plays (``play.py`` runs one).

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
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable

from .runner import REPO
from .show import Show
from .timeline import short

SCENARIOS = ("story", "mention", "big-pr", "redelivery", "crash-recovery", "ready")

CRASH_DELAY = 3.0
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
        f"reviews posted: {len(posted)}; check runs for the head: {show.check_runs(number)}; "
        f"reactions on the PR: {show.reactions(number)}"
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
    await show.readiness(number, "⛔")

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
    await show.readiness(number, "⏳ Waiting — check(s) still running")
    await fake.complete_check_run(REPO, lint, "success")
    await fake.complete_check_run(REPO, tests, "failure")
    show.github('"tests" failed, "lint" passed')
    await show.readiness(number, "⛔ Blocked — failing check(s): `tests`")

    show.timeline.heading("The test fixed, CI green, a quiet window")
    show.push({"tests/test_app.py": "def test_handler():\n    assert True\n"}, "Fix the test")
    head = show.pull(number).head_sha
    show.human(AUTHOR, f"pushed a fix for the failing test ({short(head)})")
    for name in ("tests", "lint"):
        run_id = await fake.start_check_run(REPO, head, name, app="actions")
        await fake.complete_check_run(REPO, run_id, "success")
    show.github('"tests" and "lint" passed')
    await show.readiness(number, "⏳ Waiting — a quiet window")
    show.demo("quiet window: 3 s here (10 min by default); the look at its end is a row of the durable queue")
    await show.readiness(number, "✅", within=30.0)
    check = show.readiness_run(number)
    assert check is not None  # it said "✅" just now
    show.github(f'check run "{check.name}": {check.conclusion}; nothing merged (the bot never merges)')


STORIES: dict[str, Callable[[Show], Awaitable[None]]] = {
    "story": story,
    "mention": mention,
    "big-pr": big_pr,
    "redelivery": redelivery,
    "crash-recovery": crash_recovery,
    "ready": ready,
}
