"""What the bot says about readiness: the call, its reasons and a recap of what it saw, from
GitHub's record and its own markers (never the process's memory)."""

from __future__ import annotations

from datetime import UTC, datetime

from ...guards import BotIdentity
from ...review.engine.inert import code
from ...review.rounds.markers import decode
from ..checks import CheckKind, check_name
from . import decide as rd
from .read import Reading


def _clock(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _duration(seconds: float) -> str:
    minutes = int(max(0.0, seconds) // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours < 48 else f"{hours // 24} days"


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
    # The heads readiness looked at and those the bot reviewed: readiness may first look after a
    # push or two (a head reviewed and pushed over at once), and they were seen all the same.
    reviewed = {str(r.get("commit_id")) for r in reading.my_reviews if r.get("commit_id")}
    heads = len({sha for sha, _ in memory.heads} | reviewed)
    head = reading.snapshot.head_sha[:7]
    lines.append(f"Heads seen: {heads} (now `{head}`).")
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


def quiet_text(identity: BotIdentity) -> str:
    """The sticky comment once its call no longer holds and the new one needs nobody: it says
    so once, instead of following every state (the check run does)."""
    name = check_name(CheckKind.READINESS, identity)
    return (
        f"⏳ Not ready yet; the `{name}` check run has the current state. "
        "I say here when it looks ready, or when something besides my review needs someone."
    )
