"""Pure decisions about the bot's earlier reviews, read from GitHub's review list (REST shapes).

GitHub's request for changes is sticky: only a later approval by the same reviewer, or a
dismissal, clears it; a later COMMENTED review does not. So "is this PR blocked by me" is the
state of the bot's latest *deciding* review (CHANGES_REQUESTED or APPROVED), ignoring its
comments, dismissed and pending reviews.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ...events import ReviewState
from ...guards import BotIdentity, is_bot_login
from ..core.model import MODEL_RULES, ReviewResult, ThreadStatus
from ..core.selection import REMOVED
from .identity import Renames, stands
from .markers import FindingMarker, ReviewMarker

DECIDING = (ReviewState.CHANGES_REQUESTED, ReviewState.APPROVED)

Review = Mapping[str, Any]


def state_of(review: Review) -> ReviewState | None:
    """A review's state as REST gives it (upper case; a webhook's lower case is read the same)."""
    return ReviewState.parse(review.get("state"))


def submitted_at(review: Review) -> float:
    text = review.get("submitted_at")
    if not text:
        return 0.0
    return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()


def bot_reviews(reviews: Iterable[Review], identity: BotIdentity) -> list[Review]:
    """The bot's reviews, oldest first (by submission time, then id)."""
    mine = [r for r in reviews if is_bot_login((r.get("user") or {}).get("login"), identity)]
    return sorted(mine, key=lambda r: (submitted_at(r), int(r.get("id") or 0)))


def latest_decision(mine: Sequence[Review]) -> Review | None:
    deciding = [r for r in mine if state_of(r) in DECIDING]
    return deciding[-1] if deciding else None


def blocking_review(mine: Sequence[Review]) -> Review | None:
    """The bot's review that blocks the PR now, if its latest decision requested changes."""
    latest = latest_decision(mine)
    if latest is not None and state_of(latest) is ReviewState.CHANGES_REQUESTED:
        return latest
    return None


def stale_approval(mine: Sequence[Review], head_sha: str) -> Review | None:
    """The bot's approval when it is its latest decision but of another commit than ``head_sha``:
    an approval is for the head it judged, so a push makes it stale."""
    latest = latest_decision(mine)
    if (
        latest is not None
        and state_of(latest) is ReviewState.APPROVED
        and latest.get("commit_id") != head_sha
    ):
        return latest
    return None


def active_approvals(mine: Sequence[Review]) -> list[Review]:
    """Every approval of the bot that was not dismissed."""
    return [r for r in mine if state_of(r) is ReviewState.APPROVED]


def active_blocks(mine: Sequence[Review]) -> list[Review]:
    """Every request for changes of the bot that was not dismissed: all must go to unblock."""
    return [r for r in mine if state_of(r) is ReviewState.CHANGES_REQUESTED]


def review_of_head(mine: Sequence[Review], head_sha: str) -> Review | None:
    """The bot's latest review of this head, recognised by its hidden marker."""
    found = None
    for review in mine:
        marker = ReviewMarker.read(review.get("body"))
        if marker is not None and marker.head_sha == head_sha:
            found = review
    return found


def last_reviewed_head(mine: Sequence[Review]) -> str | None:
    """The head of the bot's latest review (its marker; the bot's own reviews only): where a
    re-review's delta starts. Read from GitHub each time, never remembered."""
    for review in reversed(mine):
        marker = ReviewMarker.read(review.get("body"))
        if marker is not None:
            return marker.head_sha
    return None


def coalesces(existing: Review | None, *, force: bool) -> bool:
    """Whether a trigger for a head the bot already reviewed is answered by that review: always,
    blocked or not, unless ``force`` (the check run's Re-run, an overrule). The head has not
    changed, so neither has what the review says; asking again must not post a fresh full
    review each time (a budget anyone who may ask could drain)."""
    return existing is not None and not force


def prior_blockers(review_body: str | None, comment_bodies: Iterable[str | None]) -> list[FindingMarker]:
    """The blockers an earlier review listed, read back from its markers (body and comments)."""
    markers = FindingMarker.read_all(review_body)
    for body in comment_bodies:
        markers += FindingMarker.read_all(body)
    seen: set[str] = set()
    unique = []
    for marker in markers:
        if marker.severity == "blocker" and marker.fingerprint not in seen:
            seen.add(marker.fingerprint)
            unique.append(marker)
    return unique


def is_fixed(marker: FindingMarker, result: ReviewResult, renames: Renames | None = None) -> bool:
    """A finding read back from a thread is fixed at head when the analysis there no longer
    reports it, at any line (``identity.matches``: its fingerprint, its problem key, or in a
    renamed file its content). A removed file or removed code reports nothing."""
    return not stands(marker, result.findings, renames or {})


def unconfirmed(result: ReviewResult) -> frozenset[str]:
    """Paths the analysis at head did not (fully) look at, other than removed ones (over the
    file limit, ignored by config, patch omitted, a check that could not run on them): nothing
    said about them can be confirmed fixed."""
    return frozenset(s.path for s in result.skipped if s.reason != REMOVED)


def thread_status(
    marker: FindingMarker, result: ReviewResult, renames: Renames | None = None
) -> ThreadStatus:
    """Fixed, not fixed, or cannot tell when the analysis at head did not (fully) look at the
    thread's file (or the file it was renamed to): then nothing is concluded."""
    if not is_fixed(marker, result, renames):
        return ThreadStatus.NOT_FIXED
    unseen = unconfirmed(result)
    moved = (renames or {}).get(marker.path, marker.path)
    return ThreadStatus.CANNOT_TELL if marker.path in unseen or moved in unseen else ThreadStatus.FIXED


def combined_status(statuses: Sequence[ThreadStatus]) -> ThreadStatus:
    """A thread that holds several findings (one comment for a line's, or for the same problem in
    several places): fixed once every one is; not fixed while one is there; else cannot tell."""
    if ThreadStatus.NOT_FIXED in statuses:
        return ThreadStatus.NOT_FIXED
    if ThreadStatus.CANNOT_TELL in statuses:
        return ThreadStatus.CANNOT_TELL
    return ThreadStatus.FIXED


def verifiable(marker: FindingMarker) -> bool:
    """Findings of the built-in analyzers can be re-checked at head; others (an LLM reviewer's)
    need the engine that made them, and are left alone until it can judge."""
    return not marker.rule.startswith(MODEL_RULES)
