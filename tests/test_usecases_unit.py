"""The review use case against the recording fake of GitHub: what it reads, writes and decides.

Table rows are situations of one pull request; the assertion is the sequence of writes and the
review's event. (Echo loops and GitHub's rules are the end-to-end tests' business.)
"""

from __future__ import annotations

from typing import Any

import pytest

from app.review.rounds.markers import ReviewMarker, Trigger
from app.usecases.pause import pause_marker
from app.usecases.review import review_pull
from tests.recording_github import IDENTITY, REPO, RecordingGitHub, make_bot, pull, repo_config

HEAD = "a" * 40
PULL_1 = f"/repos/{REPO}/pulls/1"
CHECK_RUNS = f"/repos/{REPO}/check-runs"
CREATE_CHECK_RUN = ("POST", CHECK_RUNS)
POST_REVIEW = ("POST", f"{PULL_1}/reviews")
DROP_DECOY = ("DELETE", f"{PULL_1}/requested_reviewers")
NOTES = "hello, widgets\n"


def blobs(document: Any) -> dict[str, Any]:
    """The GraphQL blob reader's answer: every file asked for holds ``NOTES``."""
    count = sum(1 for name in document["variables"] if name.startswith("e"))
    node = {"byteSize": len(NOTES), "isBinary": False, "isTruncated": False, "text": NOTES}
    return {"repository": {f"f{i}": node for i in range(count)}}


def bot_review_of_head(*, issued_at: float) -> dict[str, Any]:
    marker = ReviewMarker(
        head_sha=HEAD, trigger=Trigger.DECOY, verdict="APPROVE", findings=0, issued_at=issued_at
    )
    return {
        "id": 5,
        "user": {"login": IDENTITY.bot_login},
        "state": "APPROVED",
        "commit_id": HEAD,
        "submitted_at": "2026-01-01T00:00:00Z",
        "body": f"Looks good.\n\n{marker.encode()}",
    }


def github(
    state: str = "open",
    reviews: list[Any] | None = None,
    requested: tuple[str, ...] = (),
    conversation: list[Any] | None = None,
) -> RecordingGitHub:
    the_pull = pull(state=state, requested_reviewers=[{"login": login} for login in requested])
    files = [
        {
            "filename": "docs/notes.txt",
            "status": "added",
            "sha": "c" * 40,
            "patch": "@@ -0,0 +1 @@\n+hello, widgets",
            "additions": 1,
        }
    ]
    return RecordingGitHub(
        {
            **repo_config(None),
            ("GET", PULL_1): the_pull,
            ("GET", f"{PULL_1}/reviews"): reviews or [],
            ("GET", f"{PULL_1}/files"): files,
            ("GET", f"{PULL_1}/comments"): [],  # overrules recorded in the bot's threads: none
            ("GET", f"/repos/{REPO}/issues/1/comments"): conversation or [],  # a pause is recorded there
            ("GET", f"/repos/{REPO}/commits/{HEAD}/check-runs"): {"total_count": 0, "check_runs": []},
            ("GET", f"/repos/{REPO}/git/trees/{HEAD}"): {
                "tree": [{"path": "docs/notes.txt", "type": "blob", "mode": "100644"}],
                "truncated": False,
            },
            ("POST", "/graphql"): blobs,
            CREATE_CHECK_RUN: {"id": 7},
            POST_REVIEW: lambda data: {"id": 8, "state": data["event"]},
            DROP_DECOY: {},
        }
    )


@pytest.mark.parametrize(
    ("situation", "approve", "trigger", "writes", "event"),
    [
        ("new", True, Trigger.DECOY, [CREATE_CHECK_RUN, POST_REVIEW], "APPROVE"),
        # no approvals
        ("new", False, Trigger.DECOY, [CREATE_CHECK_RUN, POST_REVIEW], "COMMENT"),
        ("closed", True, Trigger.DECOY, [], None),
        # a trigger that arrived before the review of this head was posted coalesces into it
        ("reviewed", True, Trigger.MENTION, [], None),
        ("reviewed", True, Trigger.DECOY, [DROP_DECOY], None),  # ... and a decoy request is still dropped
        ("reviewed later", True, Trigger.MENTION, [], None),  # an approved head has nothing new to say
        ("reviewed later", True, Trigger.RERUN, [CREATE_CHECK_RUN, POST_REVIEW], "APPROVE"),
        ("paused", True, Trigger.DECOY, [CREATE_CHECK_RUN], None),  # no review: a check run says why
        ("paused", True, Trigger.RERUN, [CREATE_CHECK_RUN], None),
    ],
)
async def test_review_pull(
    situation: str, approve: bool, trigger: Trigger, writes: list[tuple[str, str]], event: str | None
) -> None:
    received_at = 100.0
    reviews = {
        "reviewed": [bot_review_of_head(issued_at=received_at + 1)],
        "reviewed later": [bot_review_of_head(issued_at=received_at - 60)],
    }.get(situation)
    paused = {
        "id": 5,
        "user": {"login": IDENTITY.bot_login},
        "body": f"Paused.\n\n{pause_marker(paused=True, by='maya')}",
    }
    gh = github(
        state="closed" if situation == "closed" else "open",
        reviews=reviews,
        requested=("revbot",),
        conversation=[paused] if situation == "paused" else [],
    )
    await review_pull(
        gh,
        make_bot(review_approve=approve),
        repo=REPO,
        pr_number=1,
        trigger=trigger,
    )
    assert gh.writes() == writes
    posted = [c.data for c in gh.calls if (c.method, c.path) == POST_REVIEW]
    assert [p["event"] for p in posted] == ([event] if event else [])
    if situation == "paused":
        [paused_run] = [c.data for c in gh.calls if (c.method, c.path) == CREATE_CHECK_RUN]
        assert paused_run["conclusion"] == "action_required"  # holds a merge: nothing reviewed this head
        assert paused_run["output"]["title"].startswith("⏸ Paused by @maya")
    if posted:
        assert posted[0]["commit_id"] == HEAD and ReviewMarker.read(posted[0]["body"]) is not None
        [finish] = [c.data for c in gh.calls if (c.method, c.path) == CREATE_CHECK_RUN]
        assert finish["status"] == "completed" and finish["conclusion"] == "success"  # created so
