"""Triggers and guards, table-driven, against the recording fake of GitHub (milliseconds each).

Each row is one event a handler (or the router) sees; the assertion is what the bot asked of
GitHub in answer. A review that a row triggers stops at its first read (the pull request is
closed), which is all a trigger decides; what a review does is the use cases' and the
end-to-end tests' business.
"""

from __future__ import annotations

from typing import Any

import pytest
from gidgethub import BadRequest

from app.events import CheckRunEvent, Event, IssueCommentEvent, PullRequestEvent
from app.guards import may_ask
from app.handlers import router
from app.handlers.context import Context
from app.handlers.review import on_opened, on_push, on_rerun, on_review_requested
from app.jobs.routing import handler_name, select_handlers
from app.review.rounds.markers import encode
from app.usecases.commands import answer_command
from app.usecases.decoy import drop_decoy
from tests.recording_github import IDENTITY, REPO, RecordingGitHub, make_bot, pull, repo_config

PULL_1 = f"/repos/{REPO}/pulls/1"
EYES_ON_PULL = ("POST", f"/repos/{REPO}/issues/1/reactions")


def context(gh: RecordingGitHub, **settings: Any) -> Context:
    return Context(gh=gh, bot=make_bot(**settings), received_at=0.0)


def pr_event(action: str, **fields: Any) -> PullRequestEvent:
    values: dict[str, Any] = {
        "delivery_id": "d",
        "event": "pull_request",
        "installation_id": 1,
        "repo": REPO,
        "sender_login": "alice",
        "pr_number": 1,
        "author_login": "alice",
        "draft": False,
        "requested_reviewer": None,
        "requested_team": None,
    }
    return PullRequestEvent(**(values | fields))


def closed_pull(number: int = 1) -> dict[tuple[str, str], Any]:
    return {("GET", f"/repos/{REPO}/pulls/{number}"): pull(number, state="closed")}


# ------------------------------------------------------------------------------ review requests
@pytest.mark.parametrize(
    ("reviewer", "team", "config", "reviews"),
    [
        ("revbot", None, None, True),  # the decoy
        ("RevBot", None, None, True),  # logins are case-insensitive
        ("alice", None, None, False),  # one delivery per requested reviewer: not ours
        (None, "core", "review:\n  teams: [core]\n", True),
        (None, "Core", "review:\n  teams: [core]\n", True),
        (None, "docs", "review:\n  teams: [core]\n", False),
        (None, "core", None, False),  # no team configured
        (None, None, None, False),
    ],
)
async def test_review_request_triggers(
    reviewer: str | None, team: str | None, config: str | None, reviews: bool
) -> None:
    gh = RecordingGitHub({**repo_config(config), **closed_pull(), EYES_ON_PULL: {}})
    await on_review_requested(
        pr_event("review_requested", requested_reviewer=reviewer, requested_team=team), context(gh)
    )
    assert gh.writes() == ([EYES_ON_PULL] if reviews else [])
    assert (PULL_1 in gh.pulls_read()) is reviews


@pytest.mark.parametrize(
    ("draft", "config", "reviews"),
    [
        (False, None, False),  # automatic review is opt-in
        (False, "review:\n  auto: true\n", True),
        (True, "review:\n  auto: true\n", False),  # never a draft
    ],
)
async def test_automatic_review_triggers(draft: bool, config: str | None, reviews: bool) -> None:
    gh = RecordingGitHub({**repo_config(config), **closed_pull()})
    await on_opened(pr_event("opened", draft=draft), context(gh))
    assert gh.writes() == []
    assert (PULL_1 in gh.pulls_read()) is reviews


@pytest.mark.parametrize(
    "config",
    [
        None,  # re-review of a block on push is opt-in ...
        "review:\n  on_push: true\n",  # ... and only of a PR the bot blocked
    ],
)
async def test_a_push_reads_the_bots_reviews_and_leaves_a_pull_it_never_decided_alone(
    config: str | None,
) -> None:
    """Every push reads the bot's reviews: its approval of the earlier head must not stand."""
    gh = RecordingGitHub(
        {
            **repo_config(config),
            ("GET", PULL_1): pull(),
            ("GET", f"{PULL_1}/reviews"): [],
        }
    )
    await on_push(pr_event("synchronize"), context(gh))
    assert gh.writes() == []
    assert PULL_1 in gh.pulls_read()  # with its reviews, in one request


@pytest.mark.parametrize(
    ("app_slug", "name", "pr_numbers", "external_id", "reviewed"),
    [
        ("revbot", "revbot review", (1,), "1", [1]),
        ("revbot", "revbot review", (), "2", [2]),  # a fork's check run lists no PRs; the bot noted it
        ("revbot", "revbot review", (1, 3), None, [1, 3]),
        ("revbot", "lint", (1,), "1", []),  # another check run of the App
        ("other-app", "revbot review", (1,), "1", []),  # another App's check run of that name
    ],
)
async def test_rerun_triggers(
    app_slug: str, name: str, pr_numbers: tuple[int, ...], external_id: str | None, reviewed: list[int]
) -> None:
    gh = RecordingGitHub({**closed_pull(1), **closed_pull(2), **closed_pull(3)})
    event = CheckRunEvent(
        delivery_id="d",
        event="check_run",
        installation_id=1,
        repo=REPO,
        sender_login="alice",
        name=name,
        app_slug=app_slug,
        external_id=external_id,
        pr_numbers=pr_numbers,
    )
    await on_rerun(event, context(gh))
    assert gh.pulls_read() == [f"/repos/{REPO}/pulls/{n}" for n in reviewed]


# ------------------------------------------------------------------------------ the self guard
@pytest.mark.parametrize(
    ("event", "action", "sender", "handlers"),
    [
        ("issue_comment", "created", "alice", ["mentions.on_conversation_comment", "readiness.on_comment"]),
        ("issue_comment", "created", "revbot[bot]", []),  # the bot's own comment
        ("issue_comment", "created", "RevBot[bot]", []),
        ("issue_comment", "created", "revbot", []),  # the decoy's
        ("issue_comment", "edited", "alice", ["readiness.on_comment"]),
        ("issue_comment", "edited", "revbot[bot]", []),  # the bot editing its readiness comment
        (
            "pull_request",
            "synchronize",
            "alice",
            ["review.on_push", "threads.on_new_commits", "readiness.on_pull_request"],
        ),
        ("pull_request", "review_requested", "revbot[bot]", []),
        ("pull_request", "closed", "alice", []),
        (
            "pull_request_review",
            "submitted",
            "revbot[bot]",
            ["decoy.on_own_review_submitted", "readiness.on_review"],  # opted in
        ),
        (
            "pull_request_review",
            "submitted",
            "alice",
            ["decoy.on_own_review_submitted", "readiness.on_review"],
        ),
        (
            "pull_request_review_comment",
            "created",
            "alice",
            ["mentions.on_inline_comment", "threads.on_thread_reply", "readiness.on_inline_comment"],
        ),
        ("pull_request_review_comment", "created", "revbot[bot]", []),
        ("pull_request_review_thread", "resolved", "revbot[bot]", ["readiness.on_thread"]),  # opted in
        ("check_run", "rerequested", "alice", ["review.on_rerun"]),
        ("check_run", "completed", "ci[bot]", ["readiness.on_check_run"]),
        ("check_run", "completed", "revbot[bot]", []),  # the bot's own check runs wake nothing
        ("check_suite", "completed", "ci[bot]", ["readiness.on_check_suite"]),
        ("check_suite", "completed", "revbot[bot]", []),
        ("status", None, "ci[bot]", ["readiness.on_status"]),
        ("revbot_timer", None, None, ["readiness.on_timer"]),
        ("revbot_readiness", None, None, ["readiness.on_look"]),
        ("ping", None, "alice", []),
    ],
)
def test_routing_applies_the_self_guard(
    event: str, action: str | None, sender: str | None, handlers: list[str]
) -> None:
    flat = Event(delivery_id="d", event=event, installation_id=1, repo=REPO, sender_login=sender)
    payload = {"action": action} if action else {}
    chosen = select_handlers(router, flat, payload, IDENTITY)
    assert [handler_name(h).removeprefix("app.handlers.") for h in chosen] == handlers


# ------------------------------------------------------------------------------ commands
@pytest.mark.parametrize(
    ("commenter", "association", "expected"),
    [
        ("alice", "NONE", True),  # the PR's author
        ("ALICE", "NONE", True),
        ("bob", "MEMBER", True),
        ("bob", "owner", True),
        ("bob", "COLLABORATOR", True),
        ("bob", "CONTRIBUTOR", False),
        ("bob", "NONE", False),
        ("bob", None, False),
        (None, None, False),
    ],
)
def test_who_may_ask(commenter: str | None, association: str | None, expected: bool) -> None:
    allowed = ("OWNER", "MEMBER", "COLLABORATOR")
    assert (
        may_ask(commenter=commenter, association=association, pr_author="alice", allowed=allowed) is expected
    )


COMMENTS = f"/repos/{REPO}/issues/1/comments"
EYES_ON_COMMENT = ("POST", f"/repos/{REPO}/issues/comments/9/reactions")
THREADS: dict[str, Any] = {
    "repository": {"pullRequest": {"reviewThreads": {"nodes": [], "pageInfo": {"hasNextPage": False}}}}
}


def comment(body: str, *, commenter: str = "alice", association: str = "NONE") -> IssueCommentEvent:
    return IssueCommentEvent(
        delivery_id="d",
        event="issue_comment",
        installation_id=1,
        repo=REPO,
        sender_login=commenter,
        issue_number=1,
        is_pull_request=True,
        pr_number=1,
        author_login="alice",
        comment_id=9,
        body=body,
        commenter_login=commenter,
        commenter_association=association,
    )


@pytest.mark.parametrize(
    ("body", "commenter", "association", "earlier", "writes", "reads_pull", "says"),
    [
        ("thanks!", "alice", "NONE", [], [], False, None),  # not addressed to the bot
        ("@revbot review", "alice", "NONE", [], [EYES_ON_COMMENT], True, None),
        ("@revbot can you take a look?", "bob", "MEMBER", [], [EYES_ON_COMMENT], True, None),
        ("@revbot resolve", "alice", "NONE", [], [EYES_ON_COMMENT], False, None),
        ("@revbot help", "alice", "NONE", [], [EYES_ON_COMMENT, ("POST", COMMENTS)], False, "Commands"),
        ("@revbot review", "bob", "NONE", [], [("POST", COMMENTS)], False, "thanks for asking"),
        # asked again by the same person: silence (the earlier answer carries its marker)
        ("@revbot review", "bob", "NONE", ["refused:bob"], [], False, None),
    ],
)
async def test_commands(
    body: str,
    commenter: str,
    association: str,
    earlier: list[str],
    writes: list[tuple[str, str]],
    reads_pull: bool,
    says: str | None,
) -> None:
    posted = [
        {"user": {"login": IDENTITY.bot_login}, "body": f"...\n\n{encode('note', key=key)}"}
        for key in earlier
    ]
    gh = RecordingGitHub(
        {
            **repo_config(None),
            **closed_pull(),
            EYES_ON_COMMENT: {},
            ("GET", COMMENTS): posted,
            ("POST", COMMENTS): {"id": 10},
            ("POST", "/graphql"): THREADS,
            ("GET", f"/repos/{REPO}/pulls/1/comments"): [],  # 👎s on the bot's comments: none
        }
    )
    event = comment(body, commenter=commenter, association=association)
    await answer_command(
        gh,
        make_bot(),
        event,
        repo=REPO,
        pr_number=1,
        reaction="issue_comment",
        thread_root=None,
        received_at=0.0,
    )
    assert gh.writes() == writes
    assert (PULL_1 in gh.pulls_read()) is reads_pull
    said = [c.data["body"] for c in gh.calls if (c.method, c.path) == ("POST", COMMENTS)]
    assert (said[0].count(says) >= 1) if says else said == []
    if body == "@revbot resolve":  # resolve checks the bot's threads, never reviews
        assert [c.path for c in gh.calls if c.method == "POST"][-1] == "/graphql"


# ------------------------------------------------------------------------------ the decoy
REQUESTED = f"{PULL_1}/requested_reviewers"


@pytest.mark.parametrize(
    ("requested", "answer", "removed"),
    [
        (["revbot"], {}, True),
        (["RevBot", "carol"], {}, True),
        (["carol"], {}, False),  # already gone: nothing to do
        ([], {}, False),
        (["revbot"], (422, {"message": "Reviews may only be requested from collaborators."}), True),
    ],
)
async def test_drop_decoy(requested: list[str], answer: Any, removed: bool) -> None:
    gh = RecordingGitHub({("DELETE", REQUESTED): answer})
    await drop_decoy(
        gh, make_bot(), repo=REPO, pr_number=1, requested=requested
    )  # a refusal is logged, not raised
    assert gh.writes() == ([("DELETE", REQUESTED)] if removed else [])
    if removed:
        assert gh.calls[0].data == {"reviewers": ["revbot"]}


async def test_an_unexpected_request_fails_the_test() -> None:
    gh = RecordingGitHub()
    with pytest.raises(AssertionError, match="GET /repos/octo/widgets/pulls/1"):
        await drop_decoy(gh, make_bot(), repo=REPO, pr_number=1, requested=[])  # nothing requested: no call
        await gh.getitem(PULL_1)


async def test_a_refused_request_surfaces_as_gidgethub_raises_it() -> None:
    gh = RecordingGitHub({("GET", PULL_1): (404, {"message": "Not Found"})})
    with pytest.raises(BadRequest):
        await gh.getitem(PULL_1)
