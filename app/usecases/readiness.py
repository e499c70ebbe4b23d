"""Follow a pull request to the end: say, in one place, whether it looks ready to merge.

Every evaluation re-reads GitHub (the pull request, every App's check runs and the commit
statuses at its head, the branch rules, reviews, threads, comments and reactions), decides
(``review.readiness.decide``), and updates in place one sticky comment (found again by its
hidden marker) and one check run ``<slug> readiness`` (``neutral`` while not ready, ``success``
when it looks ready, never ``failure``). The check run carries every call; the comment only
those ``readiness.comment`` lets through (``rd.speaks``). It never merges.

What the bot remembers between evaluations lives in its markers (the heads it saw and when,
the checks it saw fail and when CI turned green): in the output of each head's check run, and
in the comment when it speaks, so the recap is built from GitHub's record and the bot's own
markers, never from the process's memory. A head first looked at while the comment was silent
starts from the comment's last memory (GitHub lists no earlier heads to read it from). When
time alone can change the answer (the quiet window, a review still in flight, GitHub still
computing mergeability), the next look is a durable timer (``bot.timers``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import gidgethub

from .. import github
from ..commands import parse_command
from ..config import ReadinessConfig
from ..github import GitHubClient
from ..guards import is_bot_login
from ..review import readiness as rd
from ..review.engine.inert import code
from ..review.rounds.markers import decode, encode
from .bot import Bot
from .pause import paused_by, paused_headline

log = logging.getLogger(__name__)
T = TypeVar("T")

MARKER = "readiness"
HISTORY = 20  # heads and failures kept in the marker
CHECKS_PERMISSION = "check runs (checks: read)"
STATUSES_PERMISSION = "commit statuses (statuses: read)"


DRAFT_AGAIN = rd.Verdict(
    rd.Outcome.WAITING,
    rd.HEADLINE_PREFIX[rd.Outcome.WAITING] + "it is a draft again: I look again once it is ready for review",
    (),
)


def check_name(slug: str) -> str:
    return f"{slug} readiness"


def epoch(value: Any) -> float:
    """GitHub's ISO 8601 timestamp as epoch seconds (0 when absent or malformed)."""
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _clock(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _duration(seconds: float) -> str:
    minutes = int(max(0.0, seconds) // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours < 48 else f"{hours // 24} days"


# --------------------------------------------------------------------------------------------
# The bot's own memory on the pull request: the marker of its readiness comment
# --------------------------------------------------------------------------------------------
@dataclass(slots=True)
class Memory:
    heads: list[tuple[str, float]] = field(default_factory=list)  # (sha, first seen), oldest first
    red: list[tuple[str, str, float]] = field(default_factory=list)  # (check, sha, when seen failing)
    green_at: float | None = None  # when CI was last seen all passing after a failure or a push

    @classmethod
    def read(cls, data: Mapping[str, Any] | None) -> Memory:
        memory = cls()
        if not data:
            return memory
        for item in data.get("heads") or []:
            if isinstance(item, list) and len(item) == 2:
                memory.heads.append((str(item[0]), float(item[1])))
        for item in data.get("red") or []:
            if isinstance(item, list) and len(item) == 3:
                memory.red.append((str(item[0]), str(item[1]), float(item[2])))
        green = data.get("green_at")
        memory.green_at = float(green) if isinstance(green, int | float) else None
        return memory

    def marker(self, *, quiet: bool = False) -> str:
        """``quiet``: the comment no longer states a call (the check run carries it)."""
        extra = {"quiet": True} if quiet else {}
        return encode(
            MARKER,
            heads=[list(h) for h in self.heads[-HISTORY:]],
            red=[list(r) for r in self.red[-HISTORY:]],
            green_at=self.green_at,
            **extra,
        )

    def seen_at(self, sha: str) -> float | None:
        return next((at for head, at in self.heads if head == sha), None)


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

    @property
    def comment_is_quiet(self) -> bool:
        data = decode(self.comment.get("body"), MARKER) if self.comment else None
        return bool(data and data.get("quiet"))


# --------------------------------------------------------------------------------------------
# Reading GitHub
# --------------------------------------------------------------------------------------------
def _settings(config: ReadinessConfig) -> rd.Settings:
    return rd.Settings(
        quiet_seconds=config.quiet_minutes * 60.0,
        ignore_checks=frozenset(config.ignore_checks),
        drafts=config.drafts,
        comment=config.comment,
    )


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


def _review_state(value: Any) -> rd.ReviewState | None:
    try:
        return rd.ReviewState(str(value))
    except ValueError:
        return None


def _decision(value: Any) -> rd.ReviewDecision | None:
    try:
        return rd.ReviewDecision(str(value)) if value else None
    except ValueError:
        return None


def _is_bot_user(user: Mapping[str, Any]) -> bool:
    return user.get("type") == "Bot" or str(user.get("login") or "").endswith("[bot]")


async def _optional(read: Any, missing: list[str], permission: str, default: Any) -> Any:
    """A read that GitHub may refuse for lack of a permission: the default, and the permission
    named, instead of a guess."""
    try:
        return await read
    except gidgethub.BadRequest as exc:
        if github.is_forbidden(exc):
            missing.append(permission)
            return default
        raise


async def _unreadable_is_none(read: Awaitable[T]) -> T | None:
    """Branch rules the App may not read (403) or that are gone (404): unknown, not an error;
    with neither readable, every check counts."""
    try:
        return await read
    except gidgethub.BadRequest as exc:
        if int(exc.status_code) not in (403, 404):
            raise
        return None


async def read_state(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    pull: Mapping[str, Any],
    reviews: Sequence[Mapping[str, Any]],
    since: float,
) -> Reading:
    identity = bot.identity
    number = int(pull["number"])
    head = str((pull.get("head") or {}).get("sha") or "")
    base_ref = str((pull.get("base") or {}).get("ref") or "")
    missing: list[str] = []
    runs = await _optional(github.list_check_runs(gh, repo=repo, ref=head), missing, CHECKS_PERMISSION, [])
    combined = await _optional(
        github.get_combined_status(gh, repo=repo, ref=head), missing, STATUSES_PERMISSION, {}
    )
    rules = _rules(
        await _unreadable_is_none(github.list_branch_rules(gh, repo=repo, branch=base_ref)),
        await _unreadable_is_none(github.get_branch(gh, repo=repo, branch=base_ref)),
    )
    state = await github.read_review_state(gh, repo=repo, pr_number=number)
    comments = await github.list_issue_comments(gh, repo=repo, number=number)
    reactions = await github.list_pull_reactions(gh, repo=repo, pr_number=number)

    mine = [c for c in comments if is_bot_login((c.get("user") or {}).get("login"), identity)]
    comment = next((c for c in mine if decode(c.get("body"), MARKER) is not None), None)
    # The memory is in this head's check run (written at every look) or, for a head not looked
    # at yet, in the sticky comment (written when it speaks); another App's runs never count.
    own = [
        r
        for r in runs
        if (r.get("app") or {}).get("slug") == identity.slug and r.get("name") == check_name(identity.slug)
    ]
    remembered = next(
        (data for r in own if (data := decode((r.get("output") or {}).get("text"), MARKER)) is not None),
        None,
    )
    if remembered is None and comment is not None:
        remembered = decode(comment.get("body"), MARKER)
    memory = Memory.read(remembered)
    head_seen = memory.seen_at(head)
    if head_seen is None:
        head_seen = since
        memory.heads.append((head, since))

    checks: list[rd.Check] = []
    for run in runs:
        app = (run.get("app") or {}).get("slug")
        if app == identity.slug:
            continue  # our own checks never count
        at = max(epoch(run.get("started_at")), epoch(run.get("completed_at")))
        checks.append(
            rd.Check(
                str(run.get("name")), rd.check_run_state(run.get("status"), run.get("conclusion")), app, at
            )
        )
    for status in combined.get("statuses") or []:
        at = max(epoch(status.get("created_at")), epoch(status.get("updated_at")))
        checks.append(rd.Check(str(status.get("context")), rd.status_state(status.get("state")), None, at))

    snapshot_reviews = []
    for review in reviews:
        review_state = _review_state(review.get("state"))
        login = (review.get("user") or {}).get("login")
        if review_state is None or not login:
            continue
        snapshot_reviews.append(
            rd.Review(
                str(login),
                review_state,
                str(review.get("commit_id") or ""),
                epoch(review.get("submitted_at")),
            )
        )
    ignored = {identity.bot_login.casefold(), identity.decoy_login.casefold()}
    requested = [
        str(u.get("login"))
        for u in pull.get("requested_reviewers") or []
        if str(u.get("login")).casefold() not in ignored
    ] + [f"team {t.get('slug')}" for t in pull.get("requested_teams") or []]

    threads = []
    for thread in state.threads:
        if thread.is_resolved:
            continue
        author = thread.root_author_login or "someone"
        if thread.root_author_type == "Bot" and not author.endswith("[bot]"):
            author += "[bot]"
        threads.append(rd.OpenThread(thread.path, thread.line, author))

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

    activity = [head_seen, *(c.at for c in checks), *(r.at for r in snapshot_reviews), *(n.at for n in notes)]
    snapshot = rd.Snapshot(
        head_sha=head,
        base_ref=base_ref,
        author=str((pull.get("user") or {}).get("login") or ""),
        draft=bool(pull.get("draft")),
        head_pushed_at=head_seen,
        mergeable=pull.get("mergeable"),
        mergeable_state=rd.merge_state(pull.get("mergeable_state")),
        checks=tuple(checks),
        rules=rules,
        review_decision=_decision(state.review_decision),
        requested=tuple(requested),
        reviews=tuple(snapshot_reviews),
        threads=tuple(threads),
        notes=tuple(notes),
        last_activity=max(activity),
        missing_permissions=tuple(missing),
        me=identity.bot_login,
    )
    my_reviews = tuple(r for r in reviews if is_bot_login((r.get("user") or {}).get("login"), identity))
    my_threads = tuple(
        t for t in state.threads if t.root_author_type == "Bot" and t.root_author_login == identity.slug
    )
    return Reading(
        snapshot,
        epoch(pull.get("created_at")),
        comment,
        memory,
        my_reviews,
        my_threads,
        paused_by(comments, identity),
    )


# --------------------------------------------------------------------------------------------
# Saying it
# --------------------------------------------------------------------------------------------
def remember_ci(memory: Memory, snapshot: rd.Snapshot, settings: rd.Settings, now: float) -> None:
    """Record checks seen failing on this head, and when CI turned all green."""
    ci = [c for c in snapshot.checks if c.name not in settings.ignore_checks]
    for check in ci:
        if check.state == rd.CheckState.FAILED and not any(
            r[0] == check.name and r[1] == snapshot.head_sha for r in memory.red
        ):
            memory.red.append((check.name, snapshot.head_sha, now))
    all_green = bool(ci) and all(c.state == rd.CheckState.PASSED for c in ci)
    last_change = max([memory.heads[-1][1] if memory.heads else 0.0, *(r[2] for r in memory.red)])
    if all_green and (memory.green_at is None or memory.green_at < last_change):
        memory.green_at = now
    elif not all_green and memory.green_at is not None and memory.green_at < last_change:
        memory.green_at = None


def recap(reading: Reading, now: float) -> list[str]:
    """What the bot saw happen on this pull request, from GitHub's record and its markers."""
    lines: list[str] = []
    rounds = len(reading.my_reviews)
    if rounds:
        findings = sum(
            int((decode(r.get("body"), "review") or {}).get("findings") or 0) for r in reading.my_reviews
        )
        resolved = sum(1 for t in reading.my_threads if t.is_resolved)
        lines.append(
            f"My reviews: {rounds} round(s), {findings} finding(s); {resolved} of my "
            f"{len(reading.my_threads)} thread(s) verified fixed and resolved."
        )
    memory = reading.memory
    pushes = len(memory.heads)
    head = reading.snapshot.head_sha[:7]
    lines.append(f"Heads seen: {pushes} (now `{head}`).")
    if memory.red:
        failed = ", ".join(
            f"{code(name[: rd.MAX_NAME_CHARS])} on `{sha[:7]}` ({_clock(at)})"
            for name, sha, at in memory.red[-5:]
        )
        green = f"; all green since {_clock(memory.green_at)}" if memory.green_at else "; not green yet"
        lines.append(f"CI failures seen: {failed}{green}.")
    elif memory.green_at:
        lines.append(f"CI: no failures seen; all green since {_clock(memory.green_at)}.")
    if reading.created_at:
        lines.append(f"Open for {_duration(now - reading.created_at)}.")
    return lines


def render(verdict: rd.Verdict, reading: Reading, slug: str, now: float) -> str:
    parts = [verdict.headline, ""]
    if verdict.reasons:
        parts += [f"- {reason}" for reason in verdict.reasons] + [""]
    parts += ["<details><summary>What I saw on this pull request</summary>", ""]
    parts += [f"- {line}" for line in recap(reading, now)]
    parts += [
        "",
        "</details>",
        "",
        f"<sub>I say whether this looks ready; I never merge. Ask `@{slug} status` for a fresh look.</sub>",
    ]
    return "\n".join(parts)


def quiet_text(slug: str) -> str:
    """The sticky comment once its call no longer holds and the new one needs nobody: it says
    so once, instead of following every state (the check run does)."""
    return (
        f"⏳ Not ready yet; the `{check_name(slug)}` check run has the current state. "
        "I say here when it looks ready, or when something besides my review needs someone."
    )


async def publish(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    pr_number: int,
    verdict: rd.Verdict,
    reading: Reading,
    text: str,
    speak: bool = True,
) -> None:
    """Edit the sticky comment and the check run in place, only where they changed. ``speak``
    (``rd.speaks``): the call goes into the comment; otherwise a comment that stated an earlier
    call is edited once to say the check run has the current one, and none is created."""
    if speak:
        body = f"{text}\n\n{reading.memory.marker()}"
    else:
        body = f"{quiet_text(bot.identity.slug)}\n\n{reading.memory.marker(quiet=True)}"
    if verdict.outcome is rd.Outcome.PAUSED:
        pass  # paused: not a word in the conversation, not even an edit
    elif speak and reading.comment is None:
        await github.create_issue_comment(gh, repo=repo, number=pr_number, body=body)
    elif (
        reading.comment is not None
        and (speak or not reading.comment_is_quiet)
        and reading.comment.get("body") != body
    ):
        await github.update_issue_comment(gh, repo=repo, comment_id=int(reading.comment["id"]), body=body)
    head = reading.snapshot.head_sha
    name = check_name(bot.identity.slug)
    conclusion = "success" if verdict.looks_ready else "neutral"
    output = {"title": verdict.headline[:250], "summary": text[:60000], "text": reading.memory.marker()}
    existing = await github.find_check_run(
        gh, repo=repo, head_sha=head, name=name, app_id=bot.settings.app_id
    )
    if existing is None:
        payload = {
            "name": name,
            "head_sha": head,
            "status": "completed",
            "conclusion": conclusion,
            "output": output,
        }
        await github.create_check_run(gh, repo=repo, payload=payload)
        return
    shown = existing.get("output") or {}
    if (existing.get("conclusion"), shown.get("title"), shown.get("summary"), shown.get("text")) != (
        conclusion,
        output["title"],
        output["summary"],
        output["text"],
    ):
        await github.update_check_run(
            gh,
            repo=repo,
            check_run_id=int(existing["id"]),
            payload={"status": "completed", "conclusion": conclusion, "output": output},
        )


# --------------------------------------------------------------------------------------------
# The use cases
# --------------------------------------------------------------------------------------------
async def settle_soon(
    bot: Bot, *, repo: str, pr_number: int, installation_id: int | None, received_at: float
) -> None:
    """Something happened on the pull request: look at it once its burst of events settled."""
    if installation_id is None:
        return
    await bot.timers.look_again(
        repo=repo,
        pr_number=pr_number,
        installation_id=installation_id,
        at=received_at + bot.settings.readiness_settle_seconds,
        since=received_at,
    )


@dataclass(frozen=True, slots=True)
class Evaluation:
    verdict: rd.Verdict
    text: str


async def evaluate(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    pr_number: int,
    installation_id: int,
    since: float | None,
    asked: bool = False,
) -> Evaluation | None:
    """Decide and say it. None: closed, merged, not followed (unless ``asked``), or a draft the
    repository does not follow. ``since``: when the cause arrived (None: asked by a person; a
    head the bot has not seen yet then counts from the pull request's last update)."""
    now = bot.timers.now()
    pull = await github.get_pull(gh, repo=repo, pr_number=pr_number)
    if pull.get("state") != "open" or pull.get("merged"):
        return None
    if since is None:
        since = min(now, epoch(pull.get("updated_at")) or now)
    config = (await bot.repo_configs.get(gh, repo=repo, slug=bot.identity.slug)).readiness
    reviews = await github.list_reviews(gh, repo=repo, pr_number=pr_number)
    reviewed = any(is_bot_login((r.get("user") or {}).get("login"), bot.identity) for r in reviews)
    followed = config.enabled if config.enabled is not None else reviewed
    if not followed and not asked:
        return None
    settings = _settings(config)
    reading = await read_state(gh, bot, repo=repo, pull=pull, reviews=reviews, since=since)
    if reading.paused_by is not None:
        verdict: rd.Verdict | None = rd.Verdict(
            rd.Outcome.PAUSED, paused_headline(reading.paused_by, bot.identity.slug), ()
        )
    else:
        verdict = rd.decide(reading.snapshot, settings, now=now)
    if verdict is None and reading.comment is not None:
        verdict = DRAFT_AGAIN  # a call said before must not stand while it is a draft
    if verdict is None:
        return None
    remember_ci(reading.memory, reading.snapshot, settings, now)
    text = render(verdict, reading, bot.identity.slug, now)
    if followed:
        speak = rd.speaks(verdict, settings.comment)
        await publish(
            gh, bot, repo=repo, pr_number=pr_number, verdict=verdict, reading=reading, text=text, speak=speak
        )
        if verdict.outcome is rd.Outcome.PAUSED:
            log.info("readiness paused by %s", reading.paused_by)
            return Evaluation(verdict, text)  # resuming asks for the next look
        again = verdict.look_again_at
        if again is None and reading.snapshot.mergeable is None:
            again = now + bot.settings.readiness_settle_seconds  # GitHub computes it after a read
        if again is not None:
            await bot.timers.look_again(
                repo=repo, pr_number=pr_number, installation_id=installation_id, at=again, since=since
            )
    log.info("readiness %s", verdict.outcome.value)
    return Evaluation(verdict, text)
