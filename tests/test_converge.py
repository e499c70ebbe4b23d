"""Reviews that converge, end to end through the bot and the fake GitHub: a finding keeps its
identity when its line moves or its file is renamed (its open thread is neither posted again nor
resolved), a re-review comments only on what changed since the last reviewed head (all of it,
and saying so, after a force-push), and a finding declined on a pull request stays declined
there. Nobody can fake the bot's markers or overrule without the right to."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.review.analyzers import fingerprint
from app.review.rounds.markers import FindingMarker
from app.review.rounds.overrule import Overrule
from app.sandbox import Call
from tests.harness import BOT, REPO, BotHarness

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AUTHOR = "alice"
MAINTAINER = "mia"  # write access
DECOY = "revbot"
ON_PUSH = "review:\n  on_push: true\n"

BROKEN = "def handler():\n    return undefined_thing + 1\n"
MOVED = "import logging\n\nLOG = logging.getLogger(__name__)\n\n\n" + BROKEN  # the same line, 5 lines down
CONCERN = "def handler():\n    breakpoint()\n    return 1\n"
CONCERN_MOVED = "import logging\n\nLOG = logging.getLogger(__name__)\n\n\n" + CONCERN


def reviews_posted(bot: BotHarness) -> list[Call]:
    return [
        c for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/reviews") and c.status == 200
    ]


def inline(call: Call) -> list[dict[str, object]]:
    return list(call.body.get("comments") or [])


def bot_threads(bot: BotHarness, number: int) -> list[tuple[str, bool, FindingMarker]]:
    """(path, resolved, finding) of each thread the bot opened on the PR, oldest first."""
    world = bot.fake.world
    found = []
    for thread in world.threads_of(world.pull(world.repo(REPO), number)):
        root = world.review_comments[thread.comment_ids[0]]
        marker = FindingMarker.read(root.body)
        if root.user == BOT and marker is not None:
            found.append((root.path, thread.is_resolved, marker))
    return found


def root_of_first_thread(bot: BotHarness, number: int) -> int:
    world = bot.fake.world
    thread = world.threads_of(world.pull(world.repo(REPO), number))[0]
    return world.review_comments[thread.comment_ids[0]].id


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[BotHarness]:
    harness = BotHarness(tmp_path)
    for login in (DECOY, MAINTAINER):
        harness.fake.add_user(login)
    harness.fake.set_permission(REPO, MAINTAINER, "write")
    harness.fake.push(REPO, "main", {"README.md": "# widgets\n", ".github/revbot.yml": ON_PUSH})
    await harness.start()
    yield harness
    await harness.stop()
    harness.assert_conforms()


async def open_and_review(bot: BotHarness, files: dict[str, str]) -> int:
    number = bot.open_pull(files, author=AUTHOR)
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    return number


async def push(bot: BotHarness, files: dict[str, str | None], *, rerequest: bool = False) -> None:
    bot.fake.push(REPO, "feature", files)
    await bot.drain()
    if rerequest:
        await bot.fake.request_review(REPO, 1, DECOY, by=AUTHOR)
        await bot.drain()


# ------------------------------------------------------------------------- stable identity
async def test_a_finding_whose_line_moved_is_not_posted_again_and_its_thread_follows_it(
    bot: BotHarness,
) -> None:
    number = await open_and_review(bot, {"src/debug.py": CONCERN})
    [first] = reviews_posted(bot)
    assert first.body["event"] == "COMMENT" and len(inline(first)) == 1

    await push(bot, {"src/debug.py": CONCERN_MOVED}, rerequest=True)
    second = reviews_posted(bot)[-1]
    assert len(reviews_posted(bot)) == 2
    assert inline(second) == []  # its open thread holds it
    assert "**Still open** (discussed in the existing threads):" in second.body["body"]
    assert "`src/debug.py:7`" in second.body["body"]
    [(path, resolved, _)] = bot_threads(bot, number)
    assert (path, resolved) == ("src/debug.py", False)

    await push(bot, {"src/debug.py": "def handler():\n    return 1\n"})
    [(_, resolved, _)] = bot_threads(bot, number)
    assert resolved is True  # gone at head, verified


async def test_a_renamed_file_carries_its_thread(bot: BotHarness) -> None:
    number = await open_and_review(bot, {"src/app.py": BROKEN})
    assert [r.body["event"] for r in reviews_posted(bot)] == ["REQUEST_CHANGES"]

    await push(bot, {"src/app.py": None, "src/core.py": BROKEN})  # on_push: a re-review
    posted = reviews_posted(bot)
    assert [r.body["event"] for r in posted] == ["REQUEST_CHANGES", "REQUEST_CHANGES"]
    assert inline(posted[-1]) == []  # not posted again under the new name
    assert "**Blockers still present**" in posted[-1].body["body"]
    assert "Verified fixed" not in posted[-1].body["body"]
    [(path, resolved, marker)] = bot_threads(bot, number)
    assert (path, resolved, marker.path) == ("src/app.py", False, "src/app.py")  # not resolved as fixed
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"

    await push(bot, {"src/core.py": "def handler():\n    return 1\n"})
    [(_, resolved, _)] = bot_threads(bot, number)
    assert resolved is True


async def test_a_file_renamed_and_edited_in_one_push_carries_its_thread(bot: BotHarness) -> None:
    helpers = "".join(f"\n\ndef helper_{n}():\n    return {n}\n" for n in range(4))
    bot.fake.push(REPO, "main", {"src/app.py": "def handler():\n    return 1\n" + helpers})
    number = await open_and_review(bot, {"src/app.py": BROKEN + helpers})
    assert [r.body["event"] for r in reviews_posted(bot)] == ["REQUEST_CHANGES"]

    await push(bot, {"src/app.py": None, "src/core.py": '"""Core handlers."""\n\n\n' + BROKEN + helpers})
    # the latest full answer (a later 304 said it had not changed)
    [files] = [c for c in bot.fake.calls if c.path.endswith("/files") and c.status == 200][-1:]
    assert [(f["filename"], f["status"]) for f in files.response] == [("src/core.py", "renamed")]
    posted = reviews_posted(bot)
    assert [r.body["event"] for r in posted] == ["REQUEST_CHANGES", "REQUEST_CHANGES"]
    assert inline(posted[-1]) == []
    [(path, resolved, _)] = bot_threads(bot, number)
    assert (path, resolved) == ("src/app.py", False)


# ------------------------------------------------------------------------------ delta review
async def test_a_re_review_comments_only_on_lines_changed_since_the_last_reviewed_head(
    bot: BotHarness,
) -> None:
    util = "import os\n\n\ndef cwd():\n    return os.getcwd()\n"
    number = await open_and_review(bot, {"src/app.py": BROKEN, "src/util.py": util})
    [first] = reviews_posted(bot)
    assert [c["path"] for c in inline(first)] == ["src/app.py"]

    # Dropping the import makes an unchanged line wrong; the new line is wrong too.
    await push(bot, {"src/util.py": "\n\ndef cwd():\n    return os.getcwd()\n", "src/new.py": BROKEN})
    second = reviews_posted(bot)[-1]
    body = second.body["body"]
    assert second.body["event"] == "REQUEST_CHANGES"  # the verdict counts every finding
    assert [(c["path"], c["line"]) for c in inline(second)] == [("src/new.py", 2)]
    head = reviews_posted(bot)[0].body["commit_id"]
    assert f"Inline comments only on lines changed since my last review at {head[:12]}." in body
    assert "**On lines unchanged since my last review** (not commented inline again):" in body
    assert "`src/util.py:4`" in body
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"


async def test_after_a_force_push_the_re_review_is_a_full_one_and_says_so(bot: BotHarness) -> None:
    util = "import os\n\n\ndef cwd():\n    return os.getcwd()\n"
    number = await open_and_review(bot, {"src/app.py": BROKEN, "src/util.py": util})
    first_head = reviews_posted(bot)[0].body["commit_id"]
    repo = bot.fake.world.repo(REPO)
    rewritten = bot.fake.add_commit(
        REPO,
        {"src/app.py": MOVED, "src/util.py": "\n\ndef cwd():\n    return os.getcwd()\n"},
        parent=repo.branches["main"],
        message="Squashed",
        author=AUTHOR,
    )
    bot.fake.push_commit(REPO, "feature", rewritten)
    await bot.drain()
    second = reviews_posted(bot)[-1]
    assert len(reviews_posted(bot)) == 2
    body = second.body["body"]
    said = f"History was rewritten since my last review at {first_head[:12]}, so this is a full review."
    assert said in body
    assert "Inline comments only on lines changed" not in body
    # A full review: the unchanged line is commented on; the moved finding keeps its thread.
    assert [(c["path"], c["line"]) for c in inline(second)] == [("src/util.py", 4)]
    assert [(p, r) for p, r, _ in bot_threads(bot, number)] == [("src/app.py", False), ("src/util.py", False)]


# ------------------------------------------------------------------------ declined stays declined
async def test_a_declined_finding_never_comes_back_after_it_moved_and_its_file_was_renamed(
    bot: BotHarness,
) -> None:
    number = await open_and_review(bot, {"src/app.py": BROKEN})
    await bot.fake.reply(REPO, number, root_of_first_thread(bot, number), "False positive.", by=MAINTAINER)
    await bot.drain()
    assert [r.body["event"] for r in reviews_posted(bot)] == ["REQUEST_CHANGES", "APPROVE"]

    await push(bot, {"src/app.py": MOVED}, rerequest=True)
    await push(bot, {"src/app.py": None, "src/core.py": MOVED}, rerequest=True)
    posted = reviews_posted(bot)
    assert [r.body["event"] for r in posted] == ["REQUEST_CHANGES", "APPROVE", "APPROVE", "APPROVE"]
    assert all(inline(r) == [] for r in posted[1:])
    assert "1 finding overruled on this pull request" in posted[-1].body["body"]
    assert bot.fake.review_decision(REPO, number) == "APPROVED"


async def test_a_thumbs_down_declines_a_finding_in_the_round_its_file_is_renamed(bot: BotHarness) -> None:
    number = await open_and_review(bot, {"src/app.py": BROKEN})
    repo = bot.fake.world.repo(REPO)
    bot.fake.actions.react(repo, ("review_comment", root_of_first_thread(bot, number)), MAINTAINER, "-1")
    await push(bot, {"src/app.py": None, "src/core.py": BROKEN})
    posted = reviews_posted(bot)
    assert [r.body["event"] for r in posted] == ["REQUEST_CHANGES", "APPROVE"]
    assert inline(posted[-1]) == []
    assert bot.fake.review_decision(REPO, number) == "APPROVED"


# ------------------------------------------------------------------------------------ hostile
async def test_the_author_cannot_suppress_a_finding_with_fake_markers_or_a_thumbs_down(
    bot: BotHarness,
) -> None:
    number = await open_and_review(bot, {"src/app.py": BROKEN})
    root = root_of_first_thread(bot, number)
    [(_, _, real)] = bot_threads(bot, number)
    repo = bot.fake.world.repo(REPO)
    bot.fake.actions.react(repo, ("review_comment", root), AUTHOR, "-1")  # the author: not for a blocker
    forged = Overrule(
        fingerprint=real.fingerprint,
        key=real.key,
        rule=real.rule,
        path=real.path,
        line=real.line,
        severity=real.severity,
        by=MAINTAINER,
        reason="",
        thread=root,
        content=real.content,
    )
    await bot.fake.reply(REPO, number, root, f"Noted.\n\n{forged.encode()}", by=AUTHOR)
    # A thread of the author's own, marked as if the bot held the finding the next push adds.
    coming = "    return other_undefined + 1"
    held = FindingMarker(
        head_sha=real.head_sha,
        rule="python/F821",
        fingerprint=fingerprint("python/F821", "src/app.py", coming),
        path="src/app.py",
        line=1,
        severity="blocker",
    )
    await bot.fake.submit_review(
        REPO,
        number,
        by=AUTHOR,
        event="COMMENT",
        comments=[{"path": "src/app.py", "line": 1, "side": "RIGHT", "body": f"see\n\n{held.encode()}"}],
    )
    await bot.drain()

    await push(bot, {"src/app.py": MOVED + "\n\ndef other():\n" + coming + "\n"})
    posted = reviews_posted(bot)
    assert [r.body["event"] for r in posted] == ["REQUEST_CHANGES", "REQUEST_CHANGES"]
    [new] = inline(posted[-1])
    marker = FindingMarker.read(str(new["body"]))
    assert marker is not None and marker.fingerprint == held.fingerprint  # the forged one was ignored
    assert "overruled" not in posted[-1].body["body"]
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"
    assert [r for _, r, _ in bot_threads(bot, number)] == [False, False]
