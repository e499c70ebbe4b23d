"""The review, end to end: a human asks, the bot reviews through the fake GitHub, every echo of
its writes comes back as a webhook, and nothing more happens than what should."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.review.rounds.markers import FindingMarker, ReviewMarker
from app.sandbox import Call
from tests.harness import BOT, REPO, BotHarness

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AUTHOR = "alice"
MAINTAINER = "maria"
STRANGER = "mallory"
DECOY = "revbot"

BASE_PY = "".join(f"value_{n} = {n}\n" for n in range(1, 41))
KEY_HEADER = "-----BEGIN RSA PRIVATE KEY-----"

DEFECTIVE = {
    # line 3: a syntax error; line 5: an undefined name; line 7: a breakpoint
    "src/broken.py": "import os\n\ndef run(:\n    pass\n",
    "src/app.py": (
        "import os\n\n\ndef handler():\n    return undefined_thing + 1\n\n"
        "def debug():\n    breakpoint()\n    return os.getcwd()\n"
    ),
    "deploy/key.pem": f"{KEY_HEADER}\nMIIEowIBAAKCAQEAx0a\n-----END RSA PRIVATE KEY-----\n",
    "README.md": "# widgets\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> feature\n",
}


def writes(bot: BotHarness) -> list[tuple[str, str]]:
    return [(c.method, c.path) for c in bot.fake.writes()]


def reviews_posted(bot: BotHarness) -> list[Call]:
    return [
        c for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/reviews") and c.status == 200
    ]


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[BotHarness]:
    harness = BotHarness(tmp_path)
    harness.fake.add_user(DECOY)
    harness.fake.add_user(MAINTAINER)
    harness.fake.set_association(REPO, MAINTAINER, "MEMBER")
    yield harness
    await harness.stop()
    harness.assert_conforms()


async def test_a_decoy_request_gets_one_blocking_review_with_inline_findings(bot: BotHarness) -> None:
    number = bot.open_pull(DEFECTIVE, author=AUTHOR)
    await bot.start()
    head = bot.fake.world.pull(bot.fake.world.repo(REPO), number).head_sha
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()

    [post] = reviews_posted(bot)
    assert post.body["event"] == "REQUEST_CHANGES"
    assert post.body["commit_id"] == head
    rules = {(c["path"], c["line"]): c["body"] for c in post.body["comments"]}
    assert "python/syntax-error" in rules[("src/broken.py", 3)]
    assert "python/F821" in rules[("src/app.py", 5)]
    assert "debug/breakpoint" in rules[("src/app.py", 8)]
    assert "secrets/private-key" in rules[("deploy/key.pem", 1)]
    assert "conflict-marker" in rules[("README.md", 2)]
    assert all(c["side"] == "RIGHT" for c in post.body["comments"])
    assert all("MIIEowIBAAKCAQEAx0a" not in c["body"] for c in post.body["comments"])
    marker = ReviewMarker.read(post.body["body"])
    assert marker is not None and (marker.head_sha, marker.trigger) == (head, "decoy")
    findings = [m for c in post.body["comments"] for m in FindingMarker.read_all(c["body"])]
    assert {m.head_sha for m in findings} == {head}

    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"
    pull = bot.fake.world.pull(bot.fake.world.repo(REPO), number)
    assert DECOY not in pull.requested_reviewers
    # The check run is created completed, with its findings, once the review is posted: one write.
    assert writes(bot) == [
        ("POST", f"/repos/{REPO}/issues/{number}/reactions"),
        ("POST", f"/repos/{REPO}/check-runs"),
        ("POST", f"/repos/{REPO}/pulls/{number}/reviews"),
        ("DELETE", f"/repos/{REPO}/pulls/{number}/requested_reviewers"),
    ]
    [check] = [c for c in bot.fake.calls if c.method == "POST" and c.path == f"/repos/{REPO}/check-runs"]
    assert (check.body["status"], check.body["conclusion"]) == ("completed", "failure")


async def test_every_echo_of_the_bots_writes_wakes_nothing(bot: BotHarness) -> None:
    number = bot.open_pull(DEFECTIVE, author=AUTHOR)
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    echoes = [
        (f"{event}.{payload.get('action')}", delivery_id)
        for event, delivery_id, payload, _ in bot.fake.webhooks_sent
        if payload.get("sender", {}).get("login") == BOT
    ]
    assert {
        "pull_request_review.submitted",
        "pull_request_review_comment.created",
        "pull_request.review_request_removed",
        "check_run.created",
        "check_run.completed",
    } <= {kind for kind, _ in echoes}
    for kind, delivery_id in echoes:
        row = await bot.store.delivery(delivery_id)
        ran = json.loads(row["done_handlers"])
        # The decoy cleanup listens to the bot's own reviews, and readiness to its own reviews and
        # thread resolutions (they change the answer; it only asks for a later look).
        expected = {
            "pull_request_review.submitted": [
                "app.handlers.decoy.on_own_review_submitted",
                "app.handlers.readiness.on_review",
            ],
            "pull_request_review_thread.resolved": ["app.handlers.readiness.on_thread"],
        }.get(kind, [])
        assert (row["status"], ran) == ("done", expected), kind
    assert len(reviews_posted(bot)) == 1
    assert [w for w in writes(bot) if w[0] == "DELETE"] == [
        ("DELETE", f"/repos/{REPO}/pulls/{number}/requested_reviewers")
    ]


async def test_a_clean_pull_request_is_approved(bot: BotHarness) -> None:
    number = bot.open_pull({"src/ok.py": "def add(a, b):\n    return a + b\n"}, author=AUTHOR)
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    [post] = reviews_posted(bot)
    assert post.body["event"] == "APPROVE"
    assert "comments" not in post.body
    assert bot.fake.review_decision(REPO, number) == "APPROVED"


async def test_another_apps_check_run_of_the_same_name_is_left_alone(bot: BotHarness) -> None:
    """A workflow or App may name a check run like the bot's: GitHub lets only its creator update
    it, so the bot makes its own instead of failing on someone else's."""
    number = bot.open_pull({"src/ok.py": "def add(a, b):\n    return a + b\n"}, author=AUTHOR)
    await bot.start()
    head = bot.fake.world.pull(bot.fake.world.repo(REPO), number).head_sha
    theirs = await bot.fake.start_check_run(REPO, head, "revbot review", app="impostor")
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    assert [c for c in bot.fake.calls if c.status == 403] == []
    [post] = reviews_posted(bot)
    assert post.body["event"] == "APPROVE"
    runs = [r for r in bot.fake.world.check_runs.values() if r.name == "revbot review"]
    assert sorted((r.app, r.status, r.conclusion) for r in runs) == [
        ("", "completed", "success"),
        ("impostor", "in_progress", None),
    ]
    assert bot.fake.world.check_runs[theirs].app == "impostor"


async def test_the_api_check_compares_with_the_merge_base_not_the_moved_base_branch(
    bot: BotHarness,
) -> None:
    """``main`` gained a parameter after the branch was cut: the pull request never removed it,
    so only what the pull request itself changed is an API change (as its diff shows)."""
    module = "def fetch(url):\n    return url\n\n\ndef parse(text):\n    return text\n"
    base = {"pkg/__init__.py": "", "pkg/mod.py": module}
    renamed = module.replace("def parse(text):\n    return text", "def parse(data):\n    return data")
    number = bot.open_pull(
        {"pkg/mod.py": renamed},
        base_files=base,
        author=AUTHOR,
    )
    moved = module.replace("def fetch(url):", "def fetch(url, timeout=5):")
    bot.fake.push(REPO, "main", {"pkg/mod.py": moved})
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    [post] = reviews_posted(bot)
    text = json.dumps(post.body)
    assert "`parse()` parameter `text` renamed to `data`" in text
    assert "fetch()" not in text and "timeout" not in text
    # Contents are read by GraphQL expressions "<ref>:<path>": the module at head, never at the tip.
    reads = [
        v
        for c in bot.fake.calls
        if c.variables
        for v in c.variables.values()
        if str(v).endswith(":pkg/mod.py")
    ]
    tip = bot.fake.world.repo(REPO).branches["main"]
    assert reads and f"{tip}:pkg/mod.py" not in reads


async def test_with_approval_disabled_a_clean_pull_request_gets_a_comment_review(tmp_path: Path) -> None:
    bot = BotHarness(tmp_path, env={"REVIEW_APPROVE": "false"})
    bot.fake.add_user(DECOY)
    number = bot.open_pull({"src/ok.py": "def add(a, b):\n    return a + b\n"}, author=AUTHOR)
    await bot.start()
    try:
        await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
        await bot.drain()
    finally:
        await bot.stop()
    bot.assert_conforms()
    [post] = reviews_posted(bot)
    assert post.body["event"] == "COMMENT"
    assert "approval is disabled" in post.body["body"]
    assert not [
        c for c in bot.fake.calls if c.method == "POST" and c.path.endswith(f"/issues/{number}/comments")
    ]


async def test_a_mention_by_the_author_reviews_but_keeps_the_decoy_alone(bot: BotHarness) -> None:
    number = bot.open_pull(DEFECTIVE, author=AUTHOR)
    await bot.start()
    comment = await bot.fake.comment(REPO, number, "@revbot can you take a look?", by=AUTHOR)
    await bot.drain()
    assert len(reviews_posted(bot)) == 1
    assert ("POST", f"/repos/{REPO}/issues/comments/{comment['id']}/reactions") in writes(bot)
    assert not [w for w in writes(bot) if w[0] == "DELETE"]
    assert ReviewMarker.read(reviews_posted(bot)[0].body["body"]).trigger == "mention"  # type: ignore[union-attr]


async def test_a_stranger_is_refused_once_and_gets_no_review(bot: BotHarness) -> None:
    number = bot.open_pull({"src/ok.py": "x = 1\n"}, author=AUTHOR)
    await bot.start()
    await bot.fake.comment(REPO, number, "@revbot review", by=STRANGER, author_association="NONE")
    await bot.fake.comment(REPO, number, "@revbot review please!!", by=STRANGER, author_association="NONE")
    await bot.drain()
    assert reviews_posted(bot) == []
    replies = [
        c
        for c in bot.fake.calls
        if c.method == "POST" and c.path == f"/repos/{REPO}/issues/{number}/comments"
    ]
    assert len(replies) == 1 and f"@{STRANGER}" in replies[0].body["body"]


async def test_a_member_may_ask_and_help_is_answered_once(bot: BotHarness) -> None:
    number = bot.open_pull({"src/ok.py": "x = 1\n"}, author=AUTHOR)
    await bot.start()
    await bot.fake.comment(REPO, number, "@RevBot help", by=MAINTAINER, author_association="MEMBER")
    await bot.fake.comment(
        REPO, number, "> @revbot review\nquoting, not asking", by=MAINTAINER, author_association="MEMBER"
    )
    await bot.drain()
    assert reviews_posted(bot) == []
    [answer] = [
        c
        for c in bot.fake.calls
        if c.method == "POST" and c.path == f"/repos/{REPO}/issues/{number}/comments"
    ]
    assert "@revbot review" in answer.body["body"]


async def test_two_requests_50_ms_apart_produce_one_review(bot: BotHarness) -> None:
    number = bot.open_pull(DEFECTIVE, author=AUTHOR)
    await bot.start()

    async def mention_later() -> None:
        await asyncio.sleep(0.05)
        await bot.fake.comment(REPO, number, "@revbot review", by=AUTHOR)

    await asyncio.gather(bot.fake.request_review(REPO, number, DECOY, by=AUTHOR), mention_later())
    await bot.drain()
    assert len(reviews_posted(bot)) == 1
    assert [w for w in writes(bot) if w[0] == "DELETE"] == [
        ("DELETE", f"/repos/{REPO}/pulls/{number}/requested_reviewers")
    ]


async def test_a_250_file_pull_request_is_reviewed_past_the_first_page(bot: BotHarness) -> None:
    files: dict[str, str | None] = {f"pkg/mod_{n:03}.py": f"VALUE = {n}\n" for n in range(250)}
    files["pkg/mod_240.py"] = "VALUE = missing_name\n"
    number = bot.open_pull(files, author=AUTHOR)
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain(within=30)
    [post] = reviews_posted(bot)
    assert post.body["event"] == "REQUEST_CHANGES"
    assert [(c["path"], c["line"]) for c in post.body["comments"]] == [("pkg/mod_240.py", 1)]
    pages = [c for c in bot.fake.calls if c.path == f"/repos/{REPO}/pulls/{number}/files"]
    assert len(pages) == 3
    blob_queries = [c for c in bot.fake.calls if c.path == "/graphql"]
    assert 1 <= len(blob_queries) <= 6


async def test_a_pull_request_opened_by_the_bot_is_never_approved_or_blocked(bot: BotHarness) -> None:
    number = bot.open_pull(DEFECTIVE, author=BOT)
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=MAINTAINER)
    await bot.drain()
    [post] = reviews_posted(bot)
    assert post.body["event"] == "COMMENT"


async def test_rerun_from_the_checks_tab_reviews_again(bot: BotHarness) -> None:
    number = bot.open_pull({"src/ok.py": "x = 1\n"}, author=AUTHOR)
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    [run] = [c for c in bot.fake.calls if c.method == "POST" and c.path == f"/repos/{REPO}/check-runs"]
    await bot.fake.rerequest_check_run(REPO, int(run.response["id"]), by=AUTHOR)
    await bot.drain()
    assert len(reviews_posted(bot)) == 2
    assert [ReviewMarker.read(p.body["body"]).trigger for p in reviews_posted(bot)] == ["decoy", "rerun"]  # type: ignore[union-attr]


async def test_draft_pull_requests_are_not_reviewed_automatically(tmp_path: Path) -> None:
    bot = BotHarness(tmp_path)
    bot.fake.add_user(DECOY)
    bot.fake.push(REPO, "main", {".github/revbot.yml": "review:\n  auto: true\n"})
    await bot.start()
    try:
        draft = bot.open_pull({"a.py": "x = 1\n"}, author=AUTHOR, branch="draft", draft=True, notify=True)
        ready = bot.open_pull({"b.py": "y = 2\n"}, author=AUTHOR, branch="ready", notify=True)
        await bot.drain()
        await bot.fake.request_review(REPO, draft, DECOY, by=AUTHOR)
        await bot.drain()
    finally:
        await bot.stop()
    bot.assert_conforms()
    triggers = {
        (c.path.split("/")[-2], ReviewMarker.read(c.body["body"]).trigger)  # type: ignore[union-attr]
        for c in reviews_posted(bot)
    }
    assert triggers == {(str(ready), "auto"), (str(draft), "decoy")}


def check_id(bot: BotHarness) -> int:
    [created] = [c for c in bot.fake.calls if c.method == "POST" and c.path == f"/repos/{REPO}/check-runs"]
    return int(created.response["id"])


async def test_a_refused_inline_comment_moves_the_findings_to_the_body(bot: BotHarness) -> None:
    number = bot.open_pull(DEFECTIVE, author=AUTHOR)
    await bot.start()
    bot.fake.fail_next(
        "POST",
        rf"/repos/{REPO}/pulls/{number}/reviews",
        status=422,
        body={"message": "Unprocessable Entity", "errors": ["Line could not be resolved"]},
    )
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    refused, [posted] = (
        [c for c in bot.fake.calls if c.path.endswith("/reviews") and c.status == 422],
        reviews_posted(bot),
    )
    assert len(refused) == 1 and refused[0].body["comments"]
    assert "comments" not in posted.body and posted.body["event"] == "REQUEST_CHANGES"
    assert "python/F821" in posted.body["body"] and "`src/app.py:5`" in posted.body["body"]


async def test_a_team_listed_in_the_repo_config_gets_a_review_and_others_do_not(tmp_path: Path) -> None:
    bot = BotHarness(tmp_path)
    number = bot.open_pull(
        {"src/ok.py": "x = 1\n"},
        author=AUTHOR,
        base_files={".github/revbot.yml": "review:\n  teams: [Reviewers]\n"},
    )
    await bot.start()
    try:
        await bot.fake.request_team_review(REPO, number, "backend", by=AUTHOR)
        await bot.drain()
        assert reviews_posted(bot) == []
        await bot.fake.request_team_review(REPO, number, "reviewers", by=AUTHOR)
        await bot.drain()
    finally:
        await bot.stop()
    bot.assert_conforms()
    [post] = reviews_posted(bot)
    assert ReviewMarker.read(post.body["body"]).trigger == "team"  # type: ignore[union-attr]
    assert not [w for w in writes(bot) if w[0] == "DELETE"]
