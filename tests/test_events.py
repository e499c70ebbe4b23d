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
    FLATTEN_VERSION,
    CheckRunEvent,
    CheckSuiteEvent,
    Event,
    FlattenError,
    InstallationEvent,
    IssueCommentEvent,
    PullRequestEvent,
    PushEvent,
    ReviewCommentEvent,
    ReviewEvent,
    ReviewThreadEvent,
    StatusEvent,
    flatten,
    subject_of,
)
from app.guards import BotIdentity

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
    "pull_request_review_thread": ReviewThreadEvent,
    "issue_comment": IssueCommentEvent,
    "check_run": CheckRunEvent,
    "check_suite": CheckSuiteEvent,
    "status": StatusEvent,
    "push": PushEvent,
    "installation": InstallationEvent,
    "installation_repositories": InstallationEvent,
}

HANDLED = [rel for event in EXPECTED_CLASS for rel in examples(event)]


def test_examples_are_present() -> None:
    # Guards against the parametrised tests silently shrinking if the fixtures move.
    assert len(HANDLED) == 78
    assert FLATTEN_VERSION == 1


@pytest.mark.parametrize("rel", HANDLED)
def test_every_example_flattens(rel: str) -> None:
    event = rel.split("/")[0]
    payload = load(rel)
    flat = flatten(event, payload, delivery_id=f"d-{rel}", identity=IDENTITY)
    assert type(flat) is EXPECTED_CLASS[event]
    assert flat.event == event
    assert flat.action == payload.get("action")
    assert flat.delivery_id == f"d-{rel}"
    assert flat.installation_id == (payload.get("installation") or {}).get("id")
    assert flat.is_own_app is False  # no example is sent by revbot


# (file, field, expected): values copied from the example files.
FIELD_ROWS: list[tuple[str, str, Any]] = [
    ("pull_request/review_requested.payload.json", "requested_reviewer", "octocat"),
    ("pull_request/review_requested.payload.json", "requested_team", None),
    ("pull_request/review_requested.payload.json", "pr_number", 2),
    ("pull_request/review_requested.payload.json", "head_sha", "ec26c3e57ca3a959ca5aad62de7213c562f8c821"),
    ("pull_request/review_requested.payload.json", "head_ref", "changes"),
    ("pull_request/review_requested.payload.json", "base_ref", "master"),
    ("pull_request/review_requested.payload.json", "repo", "codertocat/hello-world"),
    ("pull_request/review_requested.payload.json", "repo_id", 186853002),
    ("pull_request/review_requested.payload.json", "installation_id", 1),
    (
        "pull_request/review_requested.payload.json",
        "pr_url",
        "https://github.com/Codertocat/Hello-World/pull/2",
    ),
    ("pull_request/review_requested.payload.json", "author_login", "Codertocat"),
    ("pull_request/review_requested.payload.json", "author_association", "OWNER"),
    ("pull_request/review_requested.payload.json", "is_fork", False),
    ("pull_request/review_requested.payload.json", "labels", ("bug",)),
    ("pull_request/review_requested.payload.json", "sender_login", "Codertocat"),
    ("pull_request/review_requested.payload.json", "sender_type", "User"),
    ("pull_request/review_request_removed.payload.json", "requested_reviewer", "octocat"),
    ("pull_request/opened.payload.json", "title", "Update the README with new information."),
    ("pull_request/opened.payload.json", "before", None),
    ("pull_request/synchronize.payload.json", "before", "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"),
    ("pull_request/synchronize.payload.json", "after", "ec26c3e57ca3a959ca5aad62de7213c562f8c821"),
    ("pull_request/closed.payload.json", "state", "closed"),
    ("pull_request/closed.payload.json", "merged", False),
    ("pull_request/converted_to_draft.payload.json", "draft", True),
    ("pull_request/converted_to_draft.payload.json", "installation_id", None),
    ("pull_request/ready_for_review.payload.json", "draft", False),
    ("pull_request_review/submitted.payload.json", "review_state", "commented"),
    ("pull_request_review/submitted.payload.json", "review_id", 237895671),
    ("pull_request_review/submitted.payload.json", "body", None),
    ("pull_request_review/submitted.payload.json", "reviewer_login", "Codertocat"),
    ("pull_request_review/submitted.payload.json", "commit_id", "ec26c3e57ca3a959ca5aad62de7213c562f8c821"),
    ("pull_request_review/dismissed.payload.json", "review_state", "dismissed"),
    # The dismissed example's html_url points at another repository than its number/repo do.
    ("pull_request_review/dismissed.payload.json", "pr_url", "https://github.com/hellomouse/GNS/pull/902"),
    ("pull_request_review_comment/created.payload.json", "path", "README.md"),
    ("pull_request_review_comment/created.payload.json", "line", 265),
    ("pull_request_review_comment/created.payload.json", "start_line", None),
    ("pull_request_review_comment/created.payload.json", "side", "RIGHT"),
    ("pull_request_review_comment/created.payload.json", "comment_id", 284312630),
    ("pull_request_review_comment/created.payload.json", "review_id", 237895671),
    ("pull_request_review_comment/created.payload.json", "in_reply_to_id", None),
    (
        "pull_request_review_comment/created.payload.json",
        "body",
        "Maybe you should use more emoji on this line.",
    ),
    ("pull_request_review_comment/created.payload.json", "commenter_association", "OWNER"),
    ("pull_request_review_comment/created.payload.json", "draft", False),  # key absent in this PR
    ("pull_request_review_thread/resolved.payload.json", "thread_node_id", "PRRT_kwDOFd42Pc4rQOUv"),
    ("pull_request_review_thread/resolved.payload.json", "comment_ids", (284312630,)),
    ("pull_request_review_thread/unresolved.payload.json", "action", "unresolved"),
    ("check_run/rerequested.payload.json", "app_slug", None),  # this example's app has no slug
    ("check_run/rerequested.payload.json", "pr_numbers", ()),
    ("check_run/rerequested.payload.json", "check_run_id", 4),
    ("check_run/rerequested.payload.json", "check_suite_id", 5),
    ("check_run/rerequested.payload.json", "external_id", ""),
    ("check_run/rerequested.payload.json", "repo", "github/hello-world"),
    ("check_run/completed.1.payload.json", "app_slug", "github-actions"),
    ("check_run/completed.1.payload.json", "conclusion", "failure"),
    ("check_run/completed.1.payload.json", "pr_numbers", (2,)),
    ("check_run/created.payload.json", "status", "queued"),
    ("check_run/created.payload.json", "name", "Octocoders-linter"),
    ("check_run/requested_action.payload.json", "requested_action", "lgtm|26764"),
    ("check_run/requested_action.payload.json", "app_slug", "electron-cation"),
    ("check_run/requested_action.payload.json", "pr_numbers", (26764,)),
    ("check_run/requested_action.payload.json", "head_sha", "5bd5f196a46b8222fb7484f05faba41a73cf34bd"),
    ("check_run/requested_action.payload.json", "installation_id", 690857),
    ("check_suite/completed.payload.json", "check_suite_id", 118578147),
    ("check_suite/completed.payload.json", "head_branch", "changes"),
    ("check_suite/completed.payload.json", "pr_numbers", (2,)),
    ("check_suite/requested.payload.json", "status", "queued"),
    ("check_suite/requested.payload.json", "conclusion", None),
    ("check_suite/rerequested.payload.json", "sender_login", "octocoders-linter[bot]"),
    ("check_suite/rerequested.payload.json", "sender_type", "Bot"),
    ("status/payload.json", "context", "default"),
    ("status/payload.json", "state", "success"),
    ("status/payload.json", "head_sha", "6113728f27ae82c7b1a177c8d03f9e96e0adf246"),
    ("status/payload.json", "description", None),
    ("status/with-installation.payload.json", "installation_id", 1),
    ("push/payload.json", "ref", "refs/tags/simple-tag"),
    ("push/payload.json", "before", "6113728f27ae82c7b1a177c8d03f9e96e0adf246"),
    ("push/payload.json", "after", "0000000000000000000000000000000000000000"),
    ("push/payload.json", "forced", False),
    ("push/payload.json", "deleted", True),
    ("push/payload.json", "action", None),
    ("push/with-new-branch.payload.json", "created", True),
    ("push/with-new-branch.payload.json", "ref", "refs/heads/master"),
    ("issue_comment/created.payload.json", "issue_number", 1),
    ("issue_comment/created.payload.json", "pr_number", None),
    ("issue_comment/created.payload.json", "comment_id", 492700400),
    ("issue_comment/created.payload.json", "title", "Spelling error in the README file"),
    ("issue_comment/created.payload.json", "commenter_login", "Codertocat"),
    ("issue_comment/created.payload.json", "author_association", "OWNER"),
    ("installation/created.payload.json", "installation_id", 957387),
    ("installation/created.payload.json", "repo", None),
    ("installation/created.payload.json", "repo_id", None),
    ("installation/created.payload.json", "account_login", "Codertocat"),
    ("installation/created.payload.json", "repos_added", ("codertocat/hello-world",)),
    ("installation/created.payload.json", "repos_removed", ()),
    ("installation/deleted.payload.json", "repos_removed", ("octocat/hello-world",)),
    ("installation/suspend.payload.json", "repos_added", ()),
    ("installation_repositories/added.payload.json", "repos_added", ("codertocat/space",)),
    ("installation_repositories/removed.payload.json", "repos_removed", ("octocat/hello-world",)),
    ("installation_repositories/removed.payload.json", "installation_id", 2),
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


def test_review_state_is_lowercased() -> None:
    payload = load("pull_request_review/submitted.payload.json")
    payload["review"]["state"] = "CHANGES_REQUESTED"  # REST spelling
    flat = flatten("pull_request_review", payload)
    assert isinstance(flat, ReviewEvent)
    assert flat.review_state == "changes_requested"


def test_ghost_reviewer_and_null_line() -> None:
    review = load("pull_request_review/submitted.payload.json")
    review["review"]["user"] = None
    flat = flatten("pull_request_review", review)
    assert isinstance(flat, ReviewEvent)
    assert (flat.reviewer_login, flat.reviewer_type) == (None, None)

    comment = load("pull_request_review_comment/created.payload.json")
    comment["comment"]["line"] = None  # outdated comment
    flat_comment = flatten("pull_request_review_comment", comment)
    assert isinstance(flat_comment, ReviewCommentEvent)
    assert flat_comment.line is None


def test_fork_detection() -> None:
    payload = load("pull_request/opened.payload.json")
    payload["pull_request"]["head"]["repo"] = None  # deleted fork
    flat = flatten("pull_request", payload)
    assert isinstance(flat, PullRequestEvent)
    assert flat.is_fork is True

    payload = load("pull_request/opened.payload.json")
    payload["pull_request"]["head"]["repo"]["id"] = 1
    flat = flatten("pull_request", payload)
    assert isinstance(flat, PullRequestEvent)
    assert flat.is_fork is True


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
def test_is_own_app_follows_sender(sender: str, identity: BotIdentity | None, expected: bool) -> None:
    payload = load("pull_request/opened.payload.json")
    payload["sender"]["login"] = sender
    assert flatten("pull_request", payload, identity=identity).is_own_app is expected


def test_is_own_app_on_review_thread_uses_sender_not_pr_author() -> None:
    base = load("pull_request_review_thread/resolved.payload.json")

    bot_pr_human_sender = copy.deepcopy(base)
    bot_pr_human_sender["pull_request"]["user"]["login"] = "revbot[bot]"
    bot_pr_human_sender["sender"]["login"] = "octocat"
    flat = flatten("pull_request_review_thread", bot_pr_human_sender, identity=IDENTITY)
    assert isinstance(flat, ReviewThreadEvent)
    assert flat.author_login == "revbot[bot]"
    assert flat.is_own_app is False

    human_pr_bot_sender = copy.deepcopy(base)
    human_pr_bot_sender["sender"]["login"] = "revbot[bot]"
    flat = flatten("pull_request_review_thread", human_pr_bot_sender, identity=IDENTITY)
    assert flat.is_own_app is True


def test_missing_sender_is_not_own() -> None:
    payload = load("push/payload.json")
    del payload["sender"]
    flat = flatten("push", payload, identity=IDENTITY)
    assert (flat.sender_login, flat.sender_type, flat.is_own_app) == (None, None, False)


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
    assert flat.action == payload.get("action")
    assert flat.sender_login == "Codertocat"
    assert flat.repo == (payload["repository"]["full_name"].lower() if "repository" in payload else None)


def test_workflow_run_common_values() -> None:
    flat = flatten("workflow_run", load("workflow_run/completed.payload.json"))
    assert (flat.repo, flat.repo_id, flat.installation_id) == ("octo-org/octo-repo", 300029405, None)


def _number_x() -> dict[str, Any]:
    payload = load("pull_request/opened.payload.json")
    payload["pull_request"]["number"] = "x"
    return payload


def _labels_not_a_list() -> dict[str, Any]:
    payload = load("pull_request/labeled.payload.json")
    payload["pull_request"]["labels"] = "bug"
    return payload


def _check_run_prs_not_a_list() -> dict[str, Any]:
    payload = load("check_run/completed.payload.json")
    payload["check_run"]["pull_requests"] = 2
    return payload


def _push_without_ref() -> dict[str, Any]:
    payload = load("push/payload.json")
    del payload["ref"]
    return payload


@pytest.mark.parametrize(
    ("event", "payload"),
    [
        ("pull_request", {"action": "opened"}),
        ("pull_request", _number_x()),
        ("pull_request", [1, 2]),
        ("pull_request", _labels_not_a_list()),
        ("pull_request", {"action": "opened", "pull_request": None}),
        ("pull_request_review", {"pull_request": {}, "review": {}}),
        ("pull_request_review_thread", {"pull_request": {}}),
        ("issue_comment", {"issue": {"number": 1}}),
        ("check_run", _check_run_prs_not_a_list()),
        ("push", _push_without_ref()),
        ("ping", {"action": 5}),
        ("ping", "nope"),
        ("installation", {"action": "created"}),
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
