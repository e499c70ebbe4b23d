"""Readiness: does a pull request look ready to merge? A pure decision over a snapshot of GitHub.

The snapshot is read from GitHub every time (``usecases.readiness``); nothing here does I/O or
reads a clock. ``decide`` returns one of four outcomes with the words of its first line and,
when the answer can change by time alone (the quiet window, a reviewer still at work), the
moment to look again. The bot never merges: the best it says is "your call to merge".

What holds the call, in order of weight:
- blocked (a person must act): a failing check, changes requested, an approval the rules
  require, an unresolved thread, a merge conflict, a branch behind its base when the rules
  require it up to date, a draft (only where the repository asked for drafts);
- waiting (it may clear by itself): checks still running or not started, reviewers requested
  and not answered, GitHub still computing mergeability, the bot's own review of this head
  (once it has reviewed the pull request: an approval is for the head it judged);
- a review still in flight (an 👀 or an "in progress" comment from a reviewer bot, a reviewer
  bot's check still running, or a reviewer who reviewed an earlier head but not this one):
  it holds only the "ready" call; after 15 quiet minutes it is looked at again once, and after
  30 the call is "cautiously ready" with the stalled reviewer named;
- the quiet window: no push, comment, review or check change for ``quiet_minutes``.

A blocked call names what holds it (``Block``); ``speaks`` decides from that whether the call
goes into the conversation: not for a block the bot's own review already states.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from ...events import ReviewState
from ...review.engine.inert import code
from ...settings.repoconfig import ReadinessComment

MAX_NAME_CHARS = 200  # a check's name or a path, as shown
STALL_LOOK_AGAIN = 15 * 60.0  # seconds of quiet after which a review in flight is looked at again
STALL_GIVE_UP = 30 * 60.0  # ... after which the call is made with the stalled reviewer named


class Outcome(enum.StrEnum):
    READY = "ready"
    CAUTIOUS = "cautious"
    WAITING = "waiting"
    BLOCKED = "blocked"
    PAUSED = "paused"  # ``@slug pause``: never decided here; its words are usecases.pause's


HEADLINE_PREFIX: dict[Outcome, str] = {
    Outcome.READY: "✅ Looks merge-ready — ",
    Outcome.CAUTIOUS: "🟡 Cautiously looks ready — ",
    Outcome.WAITING: "⏳ Waiting — ",
    Outcome.BLOCKED: "⛔ Blocked — ",
}


class Block(enum.StrEnum):
    """What holds a blocked call; all but the bot's own review and threads need someone to act
    that the bot has not already told (its review says what it found)."""

    DRAFT = "draft"
    CONFLICT = "conflict"
    BEHIND = "behind"
    FAILING_CHECKS = "failing-checks"
    CHANGES_REQUESTED = "changes-requested"  # by someone other than the bot
    APPROVAL_REQUIRED = "approval-required"
    THREADS = "threads"  # unresolved threads someone other than the bot opened
    BOT_REVIEW = "bot-review"  # the bot's own request for changes
    BOT_THREADS = "bot-threads"  # the bot's own unresolved threads


SAID_BY_THE_BOT = frozenset({Block.BOT_REVIEW, Block.BOT_THREADS})


class CheckState(enum.StrEnum):
    PENDING = "pending"  # queued, in progress, waiting, or a status still pending
    PASSED = "passed"  # success, neutral, skipped
    FAILED = "failed"  # failure, timed out, cancelled, action required, error, stale


class ReviewDecision(enum.StrEnum):
    """GraphQL ``PullRequestReviewDecision``; absent (None) when no review is required."""

    APPROVED = "APPROVED"
    CHANGES_REQUESTED = "CHANGES_REQUESTED"
    REVIEW_REQUIRED = "REVIEW_REQUIRED"


class MergeState(enum.StrEnum):
    """REST ``mergeable_state`` values that matter here (anything else reads as UNKNOWN)."""

    CLEAN = "clean"
    DIRTY = "dirty"  # conflicts
    BEHIND = "behind"
    BLOCKED = "blocked"
    UNSTABLE = "unstable"
    HAS_HOOKS = "has_hooks"
    DRAFT = "draft"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Check:
    """A check run (``app`` is the App's slug) or a commit status (``app`` None) on the head."""

    name: str
    state: CheckState
    app: str | None
    at: float  # the latest moment it moved (started, completed, or the status was set)


@dataclass(frozen=True, slots=True)
class Review:
    login: str
    state: ReviewState
    commit: str  # the head it reviewed
    at: float


@dataclass(frozen=True, slots=True)
class OpenThread:
    path: str
    line: int | None
    author: str

    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.line is not None else self.path


@dataclass(frozen=True, slots=True)
class Note:
    """A sign of work from someone else: a PR comment (``text``) or an 👀 on the PR (``text`` None)."""

    login: str
    is_bot: bool
    at: float
    text: str | None = None


@dataclass(frozen=True, slots=True)
class Rules:
    """What the base branch's rules say, when the App could read them (``known``)."""

    known: bool = False
    required_checks: frozenset[str] = frozenset()
    strict: bool | None = None  # the branch must be up to date with its base (None: not readable)


@dataclass(frozen=True, slots=True)
class Settings:
    """``readiness`` in ``.github/<slug>.yml``, as far as the decision needs it."""

    quiet_seconds: float = 600.0
    ignore_checks: frozenset[str] = frozenset()
    drafts: bool = False
    comment: ReadinessComment = ReadinessComment.ACTIONABLE


@dataclass(frozen=True, slots=True)
class Snapshot:
    """GitHub's state of one open pull request at its head, as read just now."""

    head_sha: str
    base_ref: str
    author: str
    draft: bool
    head_pushed_at: float  # when this head arrived (its push, or the PR's opening)
    mergeable: bool | None  # None: GitHub has not computed it yet
    mergeable_state: MergeState
    checks: tuple[Check, ...] = ()
    rules: Rules = Rules()
    review_decision: ReviewDecision | None = None
    requested: tuple[str, ...] = ()  # reviewers and teams asked and not answered yet
    reviews: tuple[Review, ...] = ()  # oldest first; the bot's own excluded
    threads: tuple[OpenThread, ...] = ()  # unresolved, anyone's
    notes: tuple[Note, ...] = ()  # others' comments and 👀 reactions on the PR
    last_activity: float = 0.0  # newest push, comment, review or check change (the bot's excluded)
    missing_permissions: tuple[str, ...] = ()
    me: str = ""  # the bot's login: its own reviews count as opinions, never as a review in flight
    my_review_check: CheckState | None = None  # the bot's own review check on the head, if any


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    headline: str  # the first line, one of the four fixed forms
    reasons: tuple[str, ...]
    look_again_at: float | None = None  # when time alone may change the answer
    blocks: frozenset[Block] = frozenset()  # what holds a blocked call

    @property
    def looks_ready(self) -> bool:
        return self.outcome in (Outcome.READY, Outcome.CAUTIOUS)

    @property
    def actionable(self) -> bool:
        """Whether a person must act on it: it looks ready (someone may merge), or it is blocked
        by more than what the bot's own review already says."""
        return self.looks_ready or (self.outcome is Outcome.BLOCKED and bool(self.blocks - SAID_BY_THE_BOT))


def speaks(verdict: Verdict, policy: ReadinessComment) -> bool:
    """Whether the call goes into the sticky comment (the check run carries every call)."""
    if policy is ReadinessComment.ALWAYS:
        return verdict.outcome is not Outcome.PAUSED
    return policy is ReadinessComment.ACTIONABLE and verdict.actionable


_IN_PROGRESS = re.compile(
    r"\b(reviewing|review(ing)? (is )?in progress|in progress|started (a |the )?review|"
    r"working on (a |the )?review|review started|analy[sz]ing)\b|⏳",
    re.IGNORECASE,
)


def says_in_progress(text: str) -> bool:
    """Whether a reviewer bot's comment announces a review under way (first 300 characters)."""
    return bool(_IN_PROGRESS.search(text[:300]))


def latest_reviews(reviews: Iterable[Review]) -> dict[str, Review]:
    """Each reviewer's latest opinion (APPROVED, CHANGES_REQUESTED or DISMISSED wins over a
    later COMMENTED, as on GitHub); pending reviews are nobody's opinion yet."""
    latest: dict[str, Review] = {}
    for review in reviews:
        if review.state == ReviewState.PENDING:
            continue
        key = review.login.casefold()
        earlier = latest.get(key)
        if (
            review.state == ReviewState.COMMENTED
            and earlier is not None
            and earlier.state != ReviewState.COMMENTED
        ):
            continue
        latest[key] = review
    return latest


def reviews_in_flight(snapshot: Snapshot) -> list[str]:
    """Who may still be reviewing this head, each with the sign seen (sorted, no duplicates)."""
    head = snapshot.head_sha
    reviewed_head = {r.login.casefold() for r in snapshot.reviews if r.commit == head}
    skip = {snapshot.author.casefold(), snapshot.me.casefold()}
    found: dict[str, str] = {}
    for review in snapshot.reviews:
        key = review.login.casefold()
        if review.commit != head and key not in reviewed_head and key not in skip:
            found.setdefault(key, f"{review.login} reviewed an earlier commit, not this one")
    for note in snapshot.notes:
        key = note.login.casefold()
        if not note.is_bot or key in reviewed_head or key in skip:
            continue
        if note.text is None:
            found.setdefault(key, f"{note.login} reacted 👀 (a review under way)")
        elif note.at >= snapshot.head_pushed_at and says_in_progress(note.text):
            found.setdefault(key, f"{note.login} says its review is in progress")
    reviewer_apps = _reviewer_apps(snapshot)
    for check in snapshot.checks:
        app = (check.app or "").casefold()
        if check.state == CheckState.PENDING and app in reviewer_apps and f"{app}[bot]" not in reviewed_head:
            found.setdefault(f"{app}[bot]", f"{check.app}'s check {_code(check.name)} is still running")
    return sorted(found.values())


def _reviewer_apps(snapshot: Snapshot) -> set[str]:
    """The slugs of the bots that reviewed or spoke on the pull request (the bot itself not)."""
    logins = [r.login for r in snapshot.reviews if r.login.endswith("[bot]")]
    logins += [n.login for n in snapshot.notes if n.is_bot]
    me = snapshot.me.casefold()
    return {login.casefold().removesuffix("[bot]") for login in logins if login.casefold() != me}


def _reviewer_check(check: Check, snapshot: Snapshot) -> bool:
    """A reviewer bot's own check is a review in flight, not CI."""
    return bool(check.app) and (check.app or "").casefold() in _reviewer_apps(snapshot)


def _code(text: str) -> str:
    """Untrusted text (a check's name, a path, a login) as inert code, capped."""
    return code(text[:MAX_NAME_CHARS])


def _names(items: Iterable[str], limit: int = 5) -> str:
    names = sorted(set(items))
    shown = ", ".join(_code(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _minutes(seconds: float) -> str:
    minutes = seconds / 60.0
    return f"{minutes:.0f} min" if minutes >= 1 else f"{seconds:.0f} s"


def _clock(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%H:%M:%S UTC")


def _is_me(login: str, snapshot: Snapshot) -> bool:
    return bool(snapshot.me) and login.casefold() == snapshot.me.casefold()


@dataclass(frozen=True, slots=True)
class _Hold:
    """One thing that holds the call: a block when it names what blocks it, else a wait."""

    why: str
    blocks: frozenset[Block] = frozenset()


def decide(snapshot: Snapshot, settings: Settings, *, now: float) -> Verdict | None:
    """The call for an open pull request (None: a draft the repository did not ask about)."""
    if snapshot.draft and not settings.drafts:
        return None
    ci = counted_checks(snapshot, settings)
    opinions = latest_reviews(snapshot.reviews)
    holds = [
        *(
            _Hold(f"I cannot read {missing}: grant the App that permission so I can judge it")
            for missing in snapshot.missing_permissions
        ),
        *_branch_holds(snapshot),
        *_ci_holds(snapshot, settings, ci),
        *_review_holds(snapshot, opinions),
        *_my_review_holds(snapshot),
        *_thread_holds(snapshot),
    ]
    blocked = [hold for hold in holds if hold.blocks]
    waiting = [hold.why for hold in holds if not hold.blocks]
    if blocked:
        return Verdict(
            Outcome.BLOCKED,
            HEADLINE_PREFIX[Outcome.BLOCKED] + "; ".join(hold.why for hold in blocked),
            tuple(waiting),
            blocks=frozenset().union(*(hold.blocks for hold in blocked)),
        )
    if waiting:
        return Verdict(Outcome.WAITING, HEADLINE_PREFIX[Outcome.WAITING] + "; ".join(waiting), ())
    return _unheld_call(snapshot, settings, now=now, evidence=_evidence(snapshot, ci, opinions))


def _branch_holds(snapshot: Snapshot) -> list[_Hold]:
    """A draft (where the repository asked about drafts), a conflict, mergeability not computed
    yet, a branch behind its base when the rules require it up to date."""
    holds = []
    if snapshot.draft:
        holds.append(_Hold("it is a draft: mark it ready for review", frozenset({Block.DRAFT})))
    if snapshot.mergeable is False or snapshot.mergeable_state == MergeState.DIRTY:
        why = f"it conflicts with {_code(snapshot.base_ref)}: merge or rebase to resolve the conflict"
        holds.append(_Hold(why, frozenset({Block.CONFLICT})))
    elif snapshot.mergeable is None:
        holds.append(_Hold("GitHub is still computing whether it merges cleanly"))
    if snapshot.mergeable_state == MergeState.BEHIND and snapshot.rules.strict:
        why = (
            f"it is behind {_code(snapshot.base_ref)} and the branch rules require it up to date:"
            " update the branch"
        )
        holds.append(_Hold(why, frozenset({Block.BEHIND})))
    return holds


def counted_checks(snapshot: Snapshot, settings: Settings) -> list[Check]:
    """CI: every check on the head but ours, the ignored ones and reviewer bots' own; only the
    required ones where the rules (read) require some."""
    ci = [
        c
        for c in snapshot.checks
        if c.name not in settings.ignore_checks and not _reviewer_check(c, snapshot)
    ]
    required = snapshot.rules.required_checks if snapshot.rules.known else frozenset()
    return [c for c in ci if c.name in required] if required else ci


def _ci_holds(snapshot: Snapshot, settings: Settings, ci: list[Check]) -> list[_Hold]:
    """Required checks not reported yet, failing checks, checks still running."""
    holds = []
    required = snapshot.rules.required_checks if snapshot.rules.known else frozenset()
    absent = required - {c.name for c in ci} - settings.ignore_checks
    if absent:
        holds.append(_Hold(f"required check(s) not reported yet: {_names(absent)}"))
    failing = [c.name for c in ci if c.state == CheckState.FAILED]
    running = [c.name for c in ci if c.state == CheckState.PENDING]
    if failing:
        why = f"failing check(s): {_names(failing)}: fix them or re-run"
        holds.append(_Hold(why, frozenset({Block.FAILING_CHECKS})))
    if running:
        holds.append(_Hold(f"check(s) still running: {_names(running)}"))
    return holds


def _review_holds(snapshot: Snapshot, opinions: dict[str, Review]) -> list[_Hold]:
    """Changes requested (the bot's own named apart), else an approval the rules require; then
    reviewers asked and not answered yet."""
    holds = []
    changes = [r.login for r in opinions.values() if r.state == ReviewState.CHANGES_REQUESTED]
    if changes:
        why = f"changes requested by {_names(changes)}: they need to re-review, or dismiss it"
        blocks = {
            Block.BOT_REVIEW if _is_me(login, snapshot) else Block.CHANGES_REQUESTED for login in changes
        }
        holds.append(_Hold(why, frozenset(blocks)))
    elif snapshot.review_decision == ReviewDecision.REVIEW_REQUIRED:
        holds.append(
            _Hold("the branch rules require an approving review", frozenset({Block.APPROVAL_REQUIRED}))
        )
    if snapshot.requested:
        holds.append(_Hold(f"review requested from {_names(snapshot.requested)}, not given yet"))
    return holds


def _my_review_holds(snapshot: Snapshot) -> list[_Hold]:
    """The bot's own review of this head: its check failing (blockers, or an analysis the pull
    request made incomplete) holds the call; once the bot has reviewed the pull request, the call
    waits for its review of this head: an approval (or silence) about an earlier commit says
    nothing of what was pushed since."""
    mine_now = latest_reviews(r for r in snapshot.reviews if _is_me(r.login, snapshot))
    blocking = any(r.state == ReviewState.CHANGES_REQUESTED for r in mine_now.values())  # said already
    if snapshot.my_review_check == CheckState.FAILED and not blocking:  # not everything analysed
        why = "my review of this head does not pass (its check says why): a person must look"
        return [_Hold(why, frozenset({Block.BOT_REVIEW}))]
    if snapshot.my_review_check == CheckState.PENDING:
        return [_Hold("my review of this head is still running")]
    mine = [r for r in snapshot.reviews if _is_me(r.login, snapshot) and r.state != ReviewState.PENDING]
    if not mine or any(r.commit == snapshot.head_sha for r in mine):
        return []
    latest = max(mine, key=lambda r: r.at)
    what = "approval" if latest.state == ReviewState.APPROVED else "review"
    return [
        _Hold(f"my {what} is of an earlier commit, {_code(latest.commit[:12])}: this head needs my review")
    ]


def _thread_holds(snapshot: Snapshot) -> list[_Hold]:
    """Unresolved threads, anyone's (the bot's own named apart)."""
    threads = snapshot.threads
    if not threads:
        return []
    shown = "; ".join(f"{_code(t.where())} ({t.author})" for t in threads[:5])
    more = f" and {len(threads) - 5} more" if len(threads) > 5 else ""
    why = f"{len(threads)} unresolved thread(s): {shown}{more}: resolve or answer them"
    blocks = {Block.BOT_THREADS if _is_me(t.author, snapshot) else Block.THREADS for t in threads}
    return [_Hold(why, frozenset(blocks))]


def _evidence(snapshot: Snapshot, ci: list[Check], opinions: dict[str, Review]) -> list[str]:
    """Why nothing holds it: what passed, who approved, and a branch behind where allowed."""
    passing = [c.name for c in ci if c.state == CheckState.PASSED]
    # an approval is for the head it judged: one of an earlier commit is no evidence
    approvals = [
        r.login
        for r in opinions.values()
        if r.state == ReviewState.APPROVED and r.commit == snapshot.head_sha
    ]
    evidence = [
        f"{len(passing)} check(s) passed" if passing else "no checks reported",
        f"approved by {_names(approvals)}" if approvals else "no approval required or given",
        "no unresolved threads",
    ]
    if snapshot.mergeable_state == MergeState.BEHIND:
        why = (
            "the rules do not require it up to date"
            if snapshot.rules.strict is False
            else "I cannot read whether the rules require it up to date"
        )
        evidence.append(f"behind {_code(snapshot.base_ref)} ({why})")
    return evidence


def _unheld_call(snapshot: Snapshot, settings: Settings, *, now: float, evidence: list[str]) -> Verdict:
    """Nothing holds it: waiting for the quiet window, then for a review still in flight (looked
    at again after 15 quiet minutes, made cautiously after 30), else ready."""
    quiet = max(0.0, now - snapshot.last_activity)
    quiet_window = settings.quiet_seconds
    if quiet < quiet_window:
        until = snapshot.last_activity + quiet_window
        words = f"a quiet window of {_minutes(quiet_window)} without activity (until {_clock(until)})"
        return Verdict(Outcome.WAITING, HEADLINE_PREFIX[Outcome.WAITING] + words, tuple(evidence), until)
    evidence = [*evidence, f"quiet for {_minutes(quiet_window)} or more"]  # stable: no edit per look
    in_flight = reviews_in_flight(snapshot)
    if not in_flight:
        return Verdict(
            Outcome.READY, HEADLINE_PREFIX[Outcome.READY] + ", ".join(evidence) + ". Your call to merge.", ()
        )
    if quiet >= STALL_GIVE_UP:
        return Verdict(
            Outcome.CAUTIOUS,
            HEADLINE_PREFIX[Outcome.CAUTIOUS]
            + ", ".join(evidence)
            + f"; but {'; '.join(in_flight)}, and nothing moved for {_minutes(quiet)}."
            " Your call to merge.",
            tuple(in_flight),
        )
    again = snapshot.last_activity + (STALL_LOOK_AGAIN if quiet < STALL_LOOK_AGAIN else STALL_GIVE_UP)
    return Verdict(
        Outcome.WAITING,
        HEADLINE_PREFIX[Outcome.WAITING] + "a review still in flight: " + "; ".join(in_flight),
        tuple(evidence),
        again,
    )
