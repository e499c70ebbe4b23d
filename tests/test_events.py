"""Flattening checked against GitHub's own example payloads (octokit/webhooks).

Expected values in the tables below were copied by hand from the JSON files, not computed by
``app.events``, so a wrong source field shows up as a wrong value rather than agreeing with itself.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from app.events import (
    NUMBER_AT,
    CheckRunEvent,
    CheckSuiteEvent,
    Event,
    FlattenError,
    IssueCommentEvent,
    PullRequestEvent,
    ReviewCommentEvent,
    ReviewEvent,
    ReviewThreadEvent,
    StatusEvent,
    flatten,
)
from app.guards import BotIdentity, sent_by_bot_or_decoy
from app.web.subjects import subject_of

EXAMPLES = Path(__file__).parent / "fixtures/github/webhooks/examples"
IDENTITY = BotIdentity.from_slug("revbot", "revbot")


def load(rel: str) -> dict[str, Any]:
    """One example payload, by path relative to the examples folder ("event/file.json")."""
    data: dict[str, Any] = json.loads((EXAMPLES / rel).read_text(encoding="utf-8"))
    return data


def examples(event: str) -> list[str]:
    return sorted(f"{event}/{path.name}" for path in (EXAMPLES / event).glob("*.json"))


EXPECTED_CLASS: dict[str, type[Event]] = {
    "pull_request": PullRequestEvent,
    "pull_request_review": ReviewEvent,
    "pull_request_review_comment": ReviewCommentEvent,
    "issue_comment": IssueCommentEvent,
    "check_run": CheckRunEvent,
    "check_suite": CheckSuiteEvent,
    "status": StatusEvent,
    "pull_request_review_thread": ReviewThreadEvent,
}

HANDLED = [rel for event in EXPECTED_CLASS for rel in examples(event)]


def test_examples_are_present() -> None:
    # Guards against the parametrised tests silently shrinking if the fixtures move.
    assert len(HANDLED) == 51 + 8 + 3 + 2


@pytest.mark.parametrize("rel", HANDLED)
def test_every_example_flattens(rel: str) -> None:
    event = rel.split("/")[0]
    payload = load(rel)
    flat = flatten(event, payload, delivery_id=f"d-{rel}")
    assert type(flat) is EXPECTED_CLASS[event]
    assert flat.event == event
    assert flat.delivery_id == f"d-{rel}"
    assert flat.installation_id == (payload.get("installation") or {}).get("id")
    assert sent_by_bot_or_decoy(flat.sender_login, IDENTITY) is False  # no example is sent by revbot


# (file, field, expected): values copied from the example files.
FIELD_ROWS: list[tuple[str, str, Any]] = [
    ("pull_request/review_requested.payload.json", "requested_reviewer", "octocat"),
    ("pull_request/review_requested.payload.json", "requested_team", None),
    ("pull_request/review_requested.payload.json", "pr_number", 2),
    ("pull_request/review_requested.payload.json", "repo", "codertocat/hello-world"),
    ("pull_request/review_requested.payload.json", "installation_id", 1),
    ("pull_request/review_requested.payload.json", "author_login", "Codertocat"),
    ("pull_request/review_requested.payload.json", "sender_login", "Codertocat"),
    ("pull_request/review_request_removed.payload.json", "requested_reviewer", "octocat"),
    ("pull_request/converted_to_draft.payload.json", "draft", True),
    ("pull_request/converted_to_draft.payload.json", "installation_id", None),
    ("pull_request/ready_for_review.payload.json", "draft", False),
    ("pull_request_review/submitted.payload.json", "body", None),
    ("pull_request_review/submitted.payload.json", "reviewer_login", "Codertocat"),
    ("pull_request_review_comment/created.payload.json", "comment_id", 284312630),
    ("pull_request_review_comment/created.payload.json", "in_reply_to_id", None),
    (
        "pull_request_review_comment/created.payload.json",
        "body",
        "Maybe you should use more emoji on this line.",
    ),
    ("pull_request_review_comment/created.payload.json", "commenter_association", "OWNER"),
    ("pull_request_review_comment/created.payload.json", "draft", False),  # key absent in this PR
    ("check_run/rerequested.payload.json", "app_slug", None),  # this example's app has no slug
    ("check_run/rerequested.payload.json", "pr_numbers", ()),
    ("check_run/rerequested.payload.json", "external_id", ""),
    ("check_run/rerequested.payload.json", "repo", "github/hello-world"),
    ("check_run/completed.1.payload.json", "app_slug", "github-actions"),
    ("check_run/completed.1.payload.json", "pr_numbers", (2,)),
    ("check_run/created.payload.json", "name", "Octocoders-linter"),
    ("check_run/requested_action.payload.json", "app_slug", "electron-cation"),
    ("check_run/requested_action.payload.json", "pr_numbers", (26764,)),
    ("check_run/requested_action.payload.json", "installation_id", 690857),
    ("issue_comment/created.payload.json", "issue_number", 1),
    ("issue_comment/created.payload.json", "pr_number", None),
    ("issue_comment/created.payload.json", "comment_id", 492700400),
    ("issue_comment/created.payload.json", "commenter_login", "Codertocat"),
    ("check_run/completed.1.payload.json", "head_sha", "ec26c3e57ca3a959ca5aad62de7213c562f8c821"),
    ("check_suite/completed.payload.json", "head_sha", "ec26c3e57ca3a959ca5aad62de7213c562f8c821"),
    ("check_suite/completed.payload.json", "app_slug", None),  # this example's app has no slug
    ("check_suite/completed.payload.json", "pr_numbers", (2,)),
    ("status/with-installation.payload.json", "sha", "6113728f27ae82c7b1a177c8d03f9e96e0adf246"),
    ("status/with-installation.payload.json", "context", "default"),
    ("pull_request_review_thread/resolved.payload.json", "pr_number", 2),
]


@pytest.mark.parametrize(("rel", "field", "expected"), FIELD_ROWS)
def test_field_values_from_examples(rel: str, field: str, expected: Any) -> None:
    flat = flatten(rel.split("/")[0], load(rel))
    assert getattr(flat, field) == expected


@pytest.mark.parametrize("rel", examples("issue_comment"))
def test_example_issue_comments_are_not_on_prs(rel: str) -> None:
    flat = flatten("issue_comment", load(rel))
    assert isinstance(flat, IssueCommentEvent)
    assert flat.is_pull_request is False
    assert flat.pr_number is None


def test_issue_comment_on_a_pr() -> None:
    payload = load("issue_comment/created.payload.json")
    payload["issue"]["pull_request"] = {
        "url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1",
        "html_url": "https://github.com/Codertocat/Hello-World/pull/1",
    }
    flat = flatten("issue_comment", payload)
    assert isinstance(flat, IssueCommentEvent)
    assert flat.is_pull_request is True
    assert flat.pr_number == flat.issue_number == 1
    assert subject_of("issue_comment", payload) == "codertocat/hello-world#1"


def test_ghost_reviewer() -> None:
    review = load("pull_request_review/submitted.payload.json")
    review["review"]["user"] = None
    flat = flatten("pull_request_review", review)
    assert isinstance(flat, ReviewEvent)
    assert flat.reviewer_login is None


@pytest.mark.parametrize(
    ("sender", "identity", "expected"),
    [
        ("revbot[bot]", IDENTITY, True),
        ("RevBot[bot]", IDENTITY, True),
        ("revbot", IDENTITY, True),  # the decoy user
        ("Codertocat", IDENTITY, False),
        ("revbot[bot]", None, False),
    ],
)
def test_sent_by_bot_or_decoy_follows_sender(
    sender: str, identity: BotIdentity | None, expected: bool
) -> None:
    payload = load("pull_request/opened.payload.json")
    payload["sender"]["login"] = sender
    assert sent_by_bot_or_decoy(flatten("pull_request", payload).sender_login, identity) is expected


def test_sent_by_bot_or_decoy_uses_sender_not_pr_author() -> None:
    base = load("pull_request_review_comment/created.payload.json")

    bot_pr_human_sender = copy.deepcopy(base)
    bot_pr_human_sender["pull_request"]["user"]["login"] = "revbot[bot]"
    bot_pr_human_sender["sender"]["login"] = "octocat"
    flat = flatten("pull_request_review_comment", bot_pr_human_sender)
    assert isinstance(flat, ReviewCommentEvent)
    assert flat.author_login == "revbot[bot]"
    assert sent_by_bot_or_decoy(flat.sender_login, IDENTITY) is False

    human_pr_bot_sender = copy.deepcopy(base)
    human_pr_bot_sender["sender"]["login"] = "revbot[bot]"
    flat = flatten("pull_request_review_comment", human_pr_bot_sender)
    assert sent_by_bot_or_decoy(flat.sender_login, IDENTITY) is True


def test_missing_sender_is_not_own() -> None:
    payload = load("push/payload.json")
    del payload["sender"]
    flat = flatten("push", payload)
    assert (flat.sender_login, sent_by_bot_or_decoy(flat.sender_login, IDENTITY)) == (None, False)


@pytest.mark.parametrize(
    ("event", "rel"),
    [
        ("workflow_run", "workflow_run/completed.payload.json"),
        ("ping", "ping/payload.json"),
        ("ping", "ping/with-organization.payload.json"),
    ],
)
def test_unhandled_events_get_common_fields_only(event: str, rel: str) -> None:
    payload = load(rel)
    flat = flatten(event, payload, delivery_id="abc")
    assert type(flat) is Event
    assert flat.event == event
    assert flat.delivery_id == "abc"
    assert flat.sender_login == "Codertocat"
    assert flat.repo == (payload["repository"]["full_name"].lower() if "repository" in payload else None)


def test_workflow_run_common_values() -> None:
    flat = flatten("workflow_run", load("workflow_run/completed.payload.json"))
    assert (flat.repo, flat.installation_id) == ("octo-org/octo-repo", None)


def _number_x() -> dict[str, Any]:
    payload = load("pull_request/opened.payload.json")
    payload["pull_request"]["number"] = "x"
    return payload


def _check_run_prs_not_a_list() -> dict[str, Any]:
    payload = load("check_run/completed.payload.json")
    payload["check_run"]["pull_requests"] = 2
    return payload


@pytest.mark.parametrize(
    ("event", "payload"),
    [
        ("pull_request", {"action": "opened"}),
        ("pull_request", _number_x()),
        ("pull_request", [1, 2]),
        ("pull_request", {"action": "opened", "pull_request": None}),
        ("pull_request_review", {"pull_request": {}, "review": {}}),
        ("issue_comment", {"issue": {"number": 1}}),
        ("check_run", _check_run_prs_not_a_list()),
        ("ping", "nope"),
    ],
)
def test_malformed_payloads_raise_flatten_error(event: str, payload: Any) -> None:
    with pytest.raises(FlattenError) as info:
        flatten(event, payload, delivery_id="bad")
    assert isinstance(info.value, ValueError)
    assert not isinstance(info.value, ValidationError)
    assert event in str(info.value)


def test_models_are_frozen_and_hashable() -> None:
    flat = flatten("pull_request", load("pull_request/labeled.payload.json"))
    assert isinstance(flat, PullRequestEvent)
    with pytest.raises(ValidationError):
        flat.pr_number = 3  # type: ignore[misc]
    assert hash(flat) == hash(flatten("pull_request", load("pull_request/labeled.payload.json")))


def _check_run_two_prs() -> dict[str, Any]:
    payload = load("check_run/completed.payload.json")
    pr = payload["check_run"]["pull_requests"][0]
    payload["check_run"]["pull_requests"].append({**pr, "number": 3})
    return payload


@pytest.mark.parametrize(
    ("event", "payload", "expected"),
    [
        ("pull_request", load("pull_request/opened.payload.json"), "codertocat/hello-world#2"),
        (
            "pull_request_review",
            load("pull_request_review/submitted.payload.json"),
            "codertocat/hello-world#2",
        ),
        (
            "pull_request_review_comment",
            load("pull_request_review_comment/created.payload.json"),
            "codertocat/hello-world#2",
        ),
        (
            "pull_request_review_thread",
            load("pull_request_review_thread/resolved.payload.json"),
            "codertocat/hello-world#2",
        ),
        ("issue_comment", load("issue_comment/created.payload.json"), "codertocat/hello-world#1"),
        ("check_run", load("check_run/completed.payload.json"), "codertocat/hello-world#2"),
        ("check_run", load("check_run/requested_action.payload.json"), "electron/electron#26764"),
        ("check_run", load("check_run/rerequested.payload.json"), "github/hello-world"),
        ("check_run", _check_run_two_prs(), "codertocat/hello-world"),
        ("check_suite", load("check_suite/completed.payload.json"), "codertocat/hello-world#2"),
        ("check_suite", load("check_suite/requested.payload.json"), "codertocat/hello-world"),
        ("push", load("push/payload.json"), "codertocat/hello-world"),
        ("status", load("status/payload.json"), "codertocat/hello-world"),
        ("workflow_run", load("workflow_run/completed.payload.json"), "octo-org/octo-repo"),
        ("installation", load("installation/created.payload.json"), "installation:957387"),
        (
            "installation_repositories",
            load("installation_repositories/removed.payload.json"),
            "installation:2",
        ),
        ("ping", load("ping/with-organization.payload.json"), "global"),
        ("pull_request", {"repository": {"full_name": "A/B"}}, "a/b"),
        ("pull_request", {"repository": {"full_name": "A/B"}, "pull_request": {"number": "2"}}, "a/b"),
        ("check_run", {"repository": {"full_name": "A/B"}, "check_run": {"pull_requests": [None]}}, "a/b"),
        ("pull_request", {}, "global"),
        ("pull_request", {"repository": None, "pull_request": None}, "global"),
        ("pull_request", {"repository": {"full_name": None}, "installation": {"id": None}}, "global"),
        ("issue_comment", {"repository": {"full_name": 7}, "issue": {"number": None}}, "global"),
        ("installation", {"installation": {"id": True}}, "global"),
        ("push", [], "global"),
        ("push", None, "global"),
    ],
)
def test_subject_of(event: str, payload: Any, expected: str) -> None:
    assert subject_of(event, payload) == expected


# A commit status names a commit, never a pull request: it is keyed by repository (readiness finds
# the pull requests of its sha).
KEYED_BY_NUMBER = [rel for rel in HANDLED if rel.split("/")[0] != "status"]


@pytest.mark.parametrize("rel", KEYED_BY_NUMBER)
def test_flatten_reads_the_number_where_the_one_table_says(rel: str) -> None:
    """``NUMBER_AT`` (what the endpoint's envelope and the queue key read) and the builders agree
    on every example: the flat event's number is the one at the table's place."""
    event_name = rel.split("/")[0]
    payload = load(rel)
    at = NUMBER_AT[event_name]
    flat = flatten(event_name, payload, delivery_id="d")
    if at.listed:
        assert isinstance(flat, CheckRunEvent | CheckSuiteEvent)
        assert flat.pr_numbers == tuple(pr["number"] for pr in payload[at.key]["pull_requests"])
    elif isinstance(flat, IssueCommentEvent):
        assert flat.issue_number == payload[at.key]["number"]
    else:
        assert isinstance(flat, PullRequestEvent | ReviewEvent | ReviewCommentEvent | ReviewThreadEvent)
        assert flat.pr_number == payload[at.key]["number"]


def test_the_table_covers_every_event_the_queue_keys_by_number() -> None:
    assert set(EXPECTED_CLASS) - {"status"} <= set(NUMBER_AT)
    assert {at.key for at in NUMBER_AT.values()} == {"pull_request", "issue", "check_run", "check_suite"}
