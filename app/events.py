"""Flatten raw GitHub webhook payloads into small, frozen, typed models.

Webhook payloads are deep, loosely typed dicts, and the same fact sits in a different place in
every event (the PR number is ``pull_request.number`` here, ``issue.number`` there, a list under
``check_run.pull_requests`` elsewhere). The worker flattens each delivery it claims (the webhook
receiver only records raw deliveries), and everything after that works on the flat models below,
so each "where does GitHub put X" decision is made once, here, and is checked against GitHub's
real example payloads in ``tests/test_events.py``.

The models hold only what a handler (or the worker) reads; add a field when a handler needs it.
The module is pure: no I/O, no clock, no logging.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, ValidationError


@dataclass(frozen=True, slots=True)
class NumberAt:
    """Where a delivery of one event names the pull request (or issue) it is about."""

    key: str  # the top-level object holding it
    listed: bool = False  # ``key.pull_requests[].number``: the PRs whose head is in this repository
    top_level: bool = False  # the payload's own ``number`` stands in when ``key.number`` is absent


# The one answer to "where is the PR number in a payload". The webhook endpoint's envelope decodes
# exactly these objects (``web.endpoint``), the queue key reads them (``subjects``), and the
# builders below read the same places (``tests/test_events.py`` checks them against each other
# on every GitHub example payload).
NUMBER_AT: Mapping[str, NumberAt] = {
    "pull_request": NumberAt("pull_request", top_level=True),
    "pull_request_review": NumberAt("pull_request", top_level=True),
    "pull_request_review_comment": NumberAt("pull_request", top_level=True),
    "pull_request_review_thread": NumberAt("pull_request", top_level=True),
    "issue_comment": NumberAt("issue"),
    "check_run": NumberAt("check_run", listed=True),
    "check_suite": NumberAt("check_suite", listed=True),
}


class ReviewState(enum.StrEnum):
    """A pull request review's ``state`` as GitHub's REST and GraphQL APIs spell it: one name for
    the GitHub client, the review engine and the use cases, all of which read reviews."""

    APPROVED = "APPROVED"
    CHANGES_REQUESTED = "CHANGES_REQUESTED"
    COMMENTED = "COMMENTED"
    DISMISSED = "DISMISSED"
    PENDING = "PENDING"

    @classmethod
    def parse(cls, value: object) -> ReviewState | None:
        """The state of a REST review, or of a webhook's (lower case); None for another value."""
        if not isinstance(value, str):
            return None
        found = cls._value2member_map_.get(value.upper())
        return found if isinstance(found, ReviewState) else None


class FlattenError(ValueError):
    """A payload is not shaped like the event it claims to be.

    One exception type (instead of ``KeyError``/``TypeError``/``ValidationError`` leaking out)
    lets the worker fail a malformed delivery's job with a single ``except``.
    """


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------


class Event(BaseModel):
    """Fields every delivery has; also the whole model for events the bot does not handle."""

    model_config = ConfigDict(frozen=True)

    delivery_id: str
    event: str
    installation_id: int | None
    repo: str | None
    sender_login: str | None
    # The one pull request the delivery is about; None where it names none (a commit status, a
    # check run's list of pull requests, an issue's comment).
    pr_number: int | None = None


class PullRequestScoped(Event):
    """Fields shared by every event that is about one pull request."""

    pr_number: int
    author_login: str | None
    draft: bool
    pr_state: str | None = None  # open | closed


class PullRequestEvent(PullRequestScoped):
    """``pull_request``: opened, synchronize, review_requested, closed, ..."""

    requested_reviewer: str | None
    requested_team: str | None


class ReviewEvent(PullRequestScoped):
    """``pull_request_review``: a review was submitted, edited or dismissed."""

    body: str | None
    reviewer_login: str | None
    # Who is still requested, as of the review (its pull request's ``requested_reviewers``)
    requested_reviewers: tuple[str, ...] = ()


class ReviewCommentEvent(PullRequestScoped):
    """``pull_request_review_comment``: one inline (diff) comment."""

    comment_id: int
    in_reply_to_id: int | None
    body: str
    commenter_login: str | None
    commenter_association: str | None


class IssueCommentEvent(Event):
    """``issue_comment``: GitHub sends PR conversation comments as comments on an issue."""

    issue_number: int
    is_pull_request: bool
    author_login: str | None
    comment_id: int
    body: str
    commenter_login: str | None
    commenter_association: str | None
    issue_state: str | None = None  # open | closed


class CheckRunEvent(Event):
    """``check_run``: created, completed, rerequested, or a button on it was pressed."""

    name: str
    app_slug: str | None
    external_id: str | None
    pr_numbers: tuple[int, ...]
    head_sha: str | None = None


class CheckSuiteEvent(Event):
    """``check_suite``: an App's suite on a commit was requested, rerequested or completed."""

    app_slug: str | None
    head_sha: str | None
    pr_numbers: tuple[int, ...]


class StatusEvent(Event):
    """``status``: a commit status was set (it names a commit, never a pull request)."""

    sha: str
    context: str | None


class ReviewThreadEvent(PullRequestScoped):
    """``pull_request_review_thread``: a thread was resolved or unresolved."""


class TimerEvent(Event):
    """A job the bot gave itself (``revbot_timer``, ``revbot_readiness``): look at a pull request
    again. ``since``: when the first cause of it arrived (epoch seconds)."""

    pr_number: int
    since: float


AnyEvent: TypeAlias = (
    Event
    | PullRequestEvent
    | ReviewEvent
    | ReviewCommentEvent
    | IssueCommentEvent
    | CheckRunEvent
    | CheckSuiteEvent
    | StatusEvent
    | ReviewThreadEvent
    | TimerEvent
)

_Fields: TypeAlias = dict[str, Any]


# --------------------------------------------------------------------------------------------
# Small readers: never raise on odd shapes, so the only errors come from explicit checks
# --------------------------------------------------------------------------------------------


def _get(obj: Any, *path: str) -> Any:
    """Walk nested mappings; None as soon as a step is missing or not a mapping.

    Missing required values then reach pydantic as None and fail validation with a message that
    names the field, instead of a bare ``KeyError``.
    """
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _require(payload: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """The sub-object an event cannot be flattened without (e.g. ``pull_request``)."""
    value = payload.get(key)
    if not isinstance(value, Mapping):
        raise FlattenError(f"payload has no {key!r} object")
    return value


def _mappings(value: Any, what: str) -> list[Mapping[str, Any]]:
    """The object items of a JSON array; a missing/null array counts as empty."""
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise FlattenError(f"{what} is not a list")
    return [item for item in value if isinstance(item, Mapping)]


def _lower(value: Any) -> Any:
    """Lowercase strings only; anything else goes on to validation untouched."""
    return value.lower() if isinstance(value, str) else value


def _pr_numbers(container: Mapping[str, Any]) -> tuple[Any, ...]:
    """Numbers of the PRs a check run lists (only PRs whose head is in this repo)."""
    items = _mappings(container.get("pull_requests"), "pull_requests")
    return tuple(pr.get("number") for pr in items)


# --------------------------------------------------------------------------------------------
# Shared field groups
# --------------------------------------------------------------------------------------------


def _common_fields(event_name: str, payload: Mapping[str, Any], delivery_id: str) -> _Fields:
    """The ``Event`` fields; ``sender_login`` is what the self guard (``guards``) reads."""
    sender_login = _get(payload, "sender", "login")
    return {
        "delivery_id": delivery_id,
        "event": event_name,
        "installation_id": _get(payload, "installation", "id"),
        "repo": _lower(_get(payload, "repository", "full_name")),
        "sender_login": sender_login,
    }


def _pr_fields(pr: Mapping[str, Any]) -> _Fields:
    """The ``PullRequestScoped`` fields, read from a ``pull_request`` object.

    ``draft`` is optional in the review-comment payload's PR schema, so absent means False.
    """
    return {
        "pr_number": pr.get("number"),
        "author_login": _get(pr, "user", "login"),
        "draft": pr.get("draft") or False,
        "pr_state": pr.get("state"),
    }


# --------------------------------------------------------------------------------------------
# One builder per event
# --------------------------------------------------------------------------------------------


def _pull_request(payload: Mapping[str, Any], common: _Fields) -> PullRequestEvent:
    pr = _require(payload, "pull_request")
    return PullRequestEvent(
        **common,
        **_pr_fields(pr),
        requested_reviewer=_get(payload, "requested_reviewer", "login"),
        requested_team=_get(payload, "requested_team", "slug"),
    )


def _review(payload: Mapping[str, Any], common: _Fields) -> ReviewEvent:
    review = _require(payload, "review")
    return ReviewEvent(
        **common,
        **_pr_fields(_require(payload, "pull_request")),
        body=review.get("body"),
        reviewer_login=_get(review, "user", "login"),
        requested_reviewers=tuple(
            str(user["login"])
            for user in _require(payload, "pull_request").get("requested_reviewers") or ()
            if isinstance(user, Mapping) and user.get("login")
        ),
    )


def _review_comment(payload: Mapping[str, Any], common: _Fields) -> ReviewCommentEvent:
    comment = _require(payload, "comment")
    return ReviewCommentEvent(
        **common,
        **_pr_fields(_require(payload, "pull_request")),
        comment_id=comment.get("id"),
        in_reply_to_id=comment.get("in_reply_to_id"),
        body=comment.get("body"),
        commenter_login=_get(comment, "user", "login"),
        commenter_association=comment.get("author_association"),
    )


def _issue_comment(payload: Mapping[str, Any], common: _Fields) -> IssueCommentEvent:
    issue = _require(payload, "issue")
    comment = _require(payload, "comment")
    # The key's presence is GitHub's documented marker that the "issue" is really a PR.
    is_pull_request = "pull_request" in issue
    number = issue.get("number")
    return IssueCommentEvent(
        **common,
        issue_number=number,
        is_pull_request=is_pull_request,
        pr_number=number if is_pull_request else None,
        author_login=_get(issue, "user", "login"),
        comment_id=comment.get("id"),
        body=comment.get("body"),
        commenter_login=_get(comment, "user", "login"),
        commenter_association=comment.get("author_association"),
        issue_state=issue.get("state"),
    )


def _check_run(payload: Mapping[str, Any], common: _Fields) -> CheckRunEvent:
    run = _require(payload, "check_run")
    return CheckRunEvent(
        **common,
        name=run.get("name"),
        app_slug=_get(run, "app", "slug"),
        external_id=run.get("external_id"),
        pr_numbers=_pr_numbers(run),
        head_sha=run.get("head_sha"),
    )


def _check_suite(payload: Mapping[str, Any], common: _Fields) -> CheckSuiteEvent:
    suite = _require(payload, "check_suite")
    return CheckSuiteEvent(
        **common,
        app_slug=_get(suite, "app", "slug"),
        head_sha=suite.get("head_sha"),
        pr_numbers=_pr_numbers(suite),
    )


def _status(payload: Mapping[str, Any], common: _Fields) -> StatusEvent:
    return StatusEvent(**common, sha=payload.get("sha"), context=payload.get("context"))


def _review_thread(payload: Mapping[str, Any], common: _Fields) -> ReviewThreadEvent:
    return ReviewThreadEvent(**common, **_pr_fields(_require(payload, "pull_request")))


def _timer(payload: Mapping[str, Any], common: _Fields) -> TimerEvent:
    return TimerEvent(**common, pr_number=_get(payload, "pull_request", "number"), since=payload.get("since"))


# The bot's own jobs (``app.jobs.timers``); GitHub sends no such event.
TIMER_EVENT = "revbot_timer"
READINESS_EVENT = "revbot_readiness"
TIMER_EVENTS = (TIMER_EVENT, READINESS_EVENT)

_BUILDERS: dict[str, Callable[[Mapping[str, Any], _Fields], AnyEvent]] = {
    "pull_request": _pull_request,
    "pull_request_review": _review,
    "pull_request_review_comment": _review_comment,
    "issue_comment": _issue_comment,
    "check_run": _check_run,
    "check_suite": _check_suite,
    "status": _status,
    "pull_request_review_thread": _review_thread,
    **dict.fromkeys(TIMER_EVENTS, _timer),
}


def flatten(
    event_name: str,
    payload: Mapping[str, Any],
    *,
    delivery_id: str = "",
) -> AnyEvent:
    """Turn one delivery into its flat model; the single entry point.

    Events without a builder (``ping``, ``workflow_run``, ...) still get the common ``Event``
    fields, so the worker can route every delivery the same way. Any shape problem
    comes out as ``FlattenError``, with pydantic's field-level message kept in the text.
    """
    if not isinstance(payload, Mapping):
        kind = type(payload).__name__
        raise FlattenError(f"{event_name} delivery {delivery_id!r}: payload is a {kind}, not an object")
    try:
        common = _common_fields(event_name, payload, delivery_id)
        builder = _BUILDERS.get(event_name)
        return builder(payload, common) if builder else Event(**common)
    except FlattenError as exc:
        raise FlattenError(f"{event_name} delivery {delivery_id!r}: {exc}") from None
    except ValidationError as exc:
        raise FlattenError(f"{event_name} delivery {delivery_id!r} is malformed: {exc}") from exc
