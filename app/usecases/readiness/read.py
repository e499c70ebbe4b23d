"""What one look at a pull request reads from GitHub, and the snapshot the decision takes.

Every look re-reads the pull request, every App's check runs and the commit statuses at its
head, the branch rules, reviews, threads, comments and reactions (``read_state``, the only I/O
here); the rest is pure: what of that GitHub answer counts as CI, as a review, as activity, and
what the bot remembers (its own check run's marker, else its comment's).
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import gidgethub

from ...commands import parse_command
from ...events import ReviewState
from ...github import calls as github
from ...github.client import GitHubClient
from ...github.pullstate import PullState
from ...guards import BotIdentity, is_bot_login
from ...review.rounds.markers import decode
from ...settings.repoconfig import ReadinessConfig
from ..bot import Bot
from ..checks import CheckKind, check_name
from ..pause import paused_by
from . import decide as rd
from .memory import MARKER, Memory

T = TypeVar("T")

CHECKS_PERMISSION = "check runs (checks: read)"
STATUSES_PERMISSION = "commit statuses (statuses: read)"


def epoch(value: Any) -> float:
    """GitHub's ISO 8601 timestamp as epoch seconds (0 when absent or malformed)."""
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


@dataclass(frozen=True, slots=True)
class Reading:
    """What one evaluation read: the snapshot for the decision, and what the recap needs."""

    snapshot: rd.Snapshot
    created_at: float
    comment: Mapping[str, Any] | None  # the bot's readiness comment, if there is one
    memory: Memory
    my_reviews: tuple[Mapping[str, Any], ...]
    my_threads: tuple[github.ReviewThread, ...]
    paused_by: str | None = None  # ``@slug pause``, read from the bot's own comments
    runs: tuple[Mapping[str, Any], ...] = ()  # the head's check runs, every App's, as read

    @property
    def comment_is_quiet(self) -> bool:
        data = decode(self.comment.get("body"), MARKER) if self.comment else None
        return bool(data and data.get("quiet"))


@dataclass(frozen=True, slots=True)
class Observed:
    """GitHub's answers of one look, as it gave them (``missing``: the permissions it refused)."""

    pull: Mapping[str, Any]
    reviews: Sequence[Mapping[str, Any]]
    runs: Sequence[Mapping[str, Any]]
    statuses: Sequence[Mapping[str, Any]]
    rules: rd.Rules
    review_state: github.DecisionAndThreads
    comments: Sequence[Mapping[str, Any]]
    reactions: Sequence[Mapping[str, Any]]
    missing: tuple[str, ...]

    @property
    def head_sha(self) -> str:
        return str((self.pull.get("head") or {}).get("sha") or "")


def settings_of(config: ReadinessConfig) -> rd.Settings:
    return rd.Settings(
        quiet_seconds=config.quiet_minutes * 60.0,
        ignore_checks=frozenset(config.ignore_checks),
        drafts=config.drafts,
        comment=config.comment,
    )


# --------------------------------------------------------------------------------------------
# Reading GitHub
# --------------------------------------------------------------------------------------------
async def _unreadable_is_none(read: Awaitable[T]) -> T | None:
    """Branch rules the App may not read (403) or that are gone (404): unknown, not an error;
    with neither readable, every check counts."""
    try:
        return await read
    except gidgethub.BadRequest as exc:
        if int(exc.status_code) not in (403, 404):
            raise
        return None


async def read_state(gh: GitHubClient, bot: Bot, *, repo: str, state: PullState, since: float) -> Reading:
    """What the pull request's state (``github.pullstate``: one request) leaves out: the base
    branch's rules, and the reactions on the pull request."""
    number = int(state.pull["number"])
    base_ref = str((state.pull.get("base") or {}).get("ref") or "")
    rules = _rules(
        await _unreadable_is_none(github.list_branch_rules(gh, repo=repo, branch=base_ref)),
        await _unreadable_is_none(github.get_branch(gh, repo=repo, branch=base_ref)),
    )
    observed = Observed(
        pull=state.pull,
        reviews=state.reviews,
        runs=state.runs or (),
        statuses=state.statuses or (),
        rules=rules,
        review_state=state.review_state,
        comments=state.comments,
        reactions=await github.list_pull_reactions(gh, repo=repo, pr_number=number),
        missing=tuple(
            permission
            for permission, part in ((CHECKS_PERMISSION, state.runs), (STATUSES_PERMISSION, state.statuses))
            if part is None
        ),
    )
    return reading_of(observed, bot.identity, since=since)


# --------------------------------------------------------------------------------------------
# What the answers mean (pure)
# --------------------------------------------------------------------------------------------
def reading_of(observed: Observed, identity: BotIdentity, *, since: float) -> Reading:
    """``since``: when a head the bot has not seen before counts as pushed."""
    comment = readiness_comment(observed.comments, identity)
    memory = remembered(observed.runs, comment, identity)
    head_seen = memory.seen_at(observed.head_sha)
    if head_seen is None:
        head_seen = since
        memory.heads.append((observed.head_sha, since))
    my_reviews = tuple(
        r for r in observed.reviews if is_bot_login((r.get("user") or {}).get("login"), identity)
    )
    my_threads = tuple(
        t
        for t in observed.review_state.threads
        if t.root_author_type == "Bot" and t.root_author_login == identity.slug
    )
    return Reading(
        snapshot_of(observed, identity, head_pushed_at=head_seen),
        epoch(observed.pull.get("created_at")),
        comment,
        memory,
        my_reviews,
        my_threads,
        paused_by(observed.comments, identity),
        tuple(observed.runs),
    )


def snapshot_of(observed: Observed, identity: BotIdentity, *, head_pushed_at: float) -> rd.Snapshot:
    pull = observed.pull
    checks = others_checks(observed.runs, observed.statuses, identity)
    reviews = reviews_of(observed.reviews)
    notes = activity_notes(observed.comments, observed.reactions, identity)
    activity = [head_pushed_at, *(c.at for c in checks), *(r.at for r in reviews), *(n.at for n in notes)]
    return rd.Snapshot(
        head_sha=observed.head_sha,
        base_ref=str((pull.get("base") or {}).get("ref") or ""),
        author=str((pull.get("user") or {}).get("login") or ""),
        draft=bool(pull.get("draft")),
        head_pushed_at=head_pushed_at,
        mergeable=pull.get("mergeable"),
        mergeable_state=merge_state(pull.get("mergeable_state")),
        checks=tuple(checks),
        rules=observed.rules,
        review_decision=_decision(observed.review_state.review_decision),
        requested=tuple(still_requested(pull, identity)),
        reviews=tuple(reviews),
        threads=tuple(open_threads(observed.review_state.threads)),
        notes=tuple(notes),
        last_activity=max(activity),
        missing_permissions=observed.missing,
        me=identity.bot_login,
        my_review_check=own_review_check(observed.runs, identity),
    )


def own_review_check(runs: Iterable[Mapping[str, Any]], identity: BotIdentity) -> rd.CheckState | None:
    """The state of the bot's own review check run on the head (None: it has none there)."""
    name = check_name(CheckKind.REVIEW, identity)
    mine = [r for r in runs if (r.get("app") or {}).get("slug") == identity.slug and r.get("name") == name]
    if not mine:
        return None
    latest = max(mine, key=lambda r: int(r.get("id") or 0))
    return check_run_state(latest.get("status"), latest.get("conclusion"))


def readiness_comment(
    comments: Iterable[Mapping[str, Any]], identity: BotIdentity
) -> Mapping[str, Any] | None:
    """The bot's sticky comment: its own comment with the readiness marker."""
    mine = [c for c in comments if is_bot_login((c.get("user") or {}).get("login"), identity)]
    return next((c for c in mine if decode(c.get("body"), MARKER) is not None), None)


def remembered(
    runs: Iterable[Mapping[str, Any]], comment: Mapping[str, Any] | None, identity: BotIdentity
) -> Memory:
    """The memory is in this head's check run (written at every look) or, for a head not looked
    at yet, in the sticky comment (written when it speaks); another App's runs never count."""
    name = check_name(CheckKind.READINESS, identity)
    own = [r for r in runs if (r.get("app") or {}).get("slug") == identity.slug and r.get("name") == name]
    data = next(
        (data for r in own if (data := decode((r.get("output") or {}).get("text"), MARKER)) is not None),
        None,
    )
    if data is None and comment is not None:
        data = decode(comment.get("body"), MARKER)
    return Memory.read(data)


def others_checks(
    runs: Iterable[Mapping[str, Any]], statuses: Iterable[Mapping[str, Any]], identity: BotIdentity
) -> list[rd.Check]:
    """CI on the head: every other App's check runs, then the commit statuses."""
    checks: list[rd.Check] = []
    for run in runs:
        app = (run.get("app") or {}).get("slug")
        if app == identity.slug:
            continue  # our own checks never count
        at = max(epoch(run.get("started_at")), epoch(run.get("completed_at")))
        state = check_run_state(run.get("status"), run.get("conclusion"))
        checks.append(rd.Check(str(run.get("name")), state, app, at))
    for status in statuses:
        at = max(epoch(status.get("created_at")), epoch(status.get("updated_at")))
        checks.append(rd.Check(str(status.get("context")), status_state(status.get("state")), None, at))
    return checks


def reviews_of(reviews: Iterable[Mapping[str, Any]]) -> list[rd.Review]:
    """The submitted reviews whose state and author GitHub gave (the bot's own included)."""
    found = []
    for review in reviews:
        state = _review_state(review.get("state"))
        login = (review.get("user") or {}).get("login")
        if state is None or not login:
            continue
        at = epoch(review.get("submitted_at"))
        found.append(rd.Review(str(login), state, str(review.get("commit_id") or ""), at))
    return found


def still_requested(pull: Mapping[str, Any], identity: BotIdentity) -> list[str]:
    """Reviewers and teams asked and not answered yet; the bot and its decoy are not waited for."""
    ignored = {identity.bot_login.casefold(), identity.decoy_login.casefold()}
    people = [
        str(u.get("login"))
        for u in pull.get("requested_reviewers") or []
        if str(u.get("login")).casefold() not in ignored
    ]
    return people + [f"team {t.get('slug')}" for t in pull.get("requested_teams") or []]


def open_threads(threads: Iterable[github.ReviewThread]) -> list[rd.OpenThread]:
    """The unresolved threads, anyone's, each named by its author as REST spells them."""
    found = []
    for thread in threads:
        if thread.is_resolved:
            continue
        author = thread.root_author_login or "someone"
        if thread.root_author_type == "Bot" and not author.endswith("[bot]"):
            author += "[bot]"
        found.append(rd.OpenThread(thread.path, thread.line, author))
    return found


def activity_notes(
    comments: Iterable[Mapping[str, Any]], reactions: Iterable[Mapping[str, Any]], identity: BotIdentity
) -> list[rd.Note]:
    """Others' comments on the pull request, then other bots' 👀 on it (a review under way)."""
    notes: list[rd.Note] = []
    for c in comments:
        user = c.get("user") or {}
        if is_bot_login(user.get("login"), identity) or parse_command(c.get("body"), identity.slug):
            continue  # the bot's own words, and asking it something, are not activity
        at = max(epoch(c.get("created_at")), epoch(c.get("updated_at")))
        notes.append(rd.Note(str(user.get("login")), _is_bot_user(user), at, str(c.get("body") or "")))
    for reaction in reactions:
        user = reaction.get("user") or {}
        if (
            reaction.get("content") == "eyes"
            and _is_bot_user(user)
            and not is_bot_login(user.get("login"), identity)
        ):
            notes.append(rd.Note(str(user.get("login")), True, epoch(reaction.get("created_at"))))
    return notes


_CHECK_RUN_STATES = {
    "success": rd.CheckState.PASSED,
    "neutral": rd.CheckState.PASSED,
    "skipped": rd.CheckState.PASSED,
    "failure": rd.CheckState.FAILED,
    "timed_out": rd.CheckState.FAILED,
    "cancelled": rd.CheckState.FAILED,
    "action_required": rd.CheckState.FAILED,
    "startup_failure": rd.CheckState.FAILED,
    "stale": rd.CheckState.FAILED,
}
_STATUS_STATES = {
    "success": rd.CheckState.PASSED,
    "pending": rd.CheckState.PENDING,
    "failure": rd.CheckState.FAILED,
    "error": rd.CheckState.FAILED,
}


def check_run_state(status: str | None, conclusion: str | None) -> rd.CheckState:
    """A check run's REST ``status``/``conclusion`` as one of three states."""
    if status != "completed":
        return rd.CheckState.PENDING
    return _CHECK_RUN_STATES.get(conclusion or "", rd.CheckState.FAILED)


def status_state(state: str | None) -> rd.CheckState:
    """A commit status's ``state`` as one of three states."""
    return _STATUS_STATES.get(state or "", rd.CheckState.FAILED)


def merge_state(value: str | None) -> rd.MergeState:
    try:
        return rd.MergeState(value or "unknown")
    except ValueError:
        return rd.MergeState.UNKNOWN


def _rules(rulesets: Iterable[Mapping[str, Any]] | None, branch: Mapping[str, Any] | None) -> rd.Rules:
    """Required checks and strictness from the base branch's rulesets and its classic protection
    (GitHub enforces both); None for a source the App could not read."""
    required: set[str] = set()
    strict: list[bool | None] = []  # what each readable source says
    if rulesets is not None:
        policies = [r.get("parameters") or {} for r in rulesets if r.get("type") == "required_status_checks"]
        for parameters in policies:
            contexts = parameters.get("required_status_checks") or []
            required |= {str(c.get("context")) for c in contexts if c.get("context")}
        strict.append(any(p.get("strict_required_status_checks_policy") for p in policies))
    if branch is not None:
        protection = branch.get("protection") or {}
        checks = protection.get("required_status_checks") or {}
        enforced = bool(protection.get("enabled") and checks) and checks.get("enforcement_level") != "off"
        if enforced:
            required |= {str(c) for c in checks.get("contexts") or [] if c}
            required |= {str(c.get("context")) for c in checks.get("checks") or [] if c.get("context")}
        # A branch's summary leaves "require up to date" out (only admins read the protection).
        strict.append(checks.get("strict") if enforced else False)
    return rd.Rules(
        known=bool(strict),
        required_checks=frozenset(required),
        strict=True if True in strict else (None if None in strict or not strict else False),
    )


def _review_state(value: Any) -> ReviewState | None:
    try:
        return ReviewState(str(value))
    except ValueError:
        return None


def _decision(value: Any) -> rd.ReviewDecision | None:
    try:
        return rd.ReviewDecision(str(value)) if value else None
    except ValueError:
        return None


def _is_bot_user(user: Mapping[str, Any]) -> bool:
    return user.get("type") == "Bot" or str(user.get("login") or "").endswith("[bot]")
