"""Hidden markers: what the bot writes into its own reviews and comments so it can read them back.

GitHub keeps HTML comments in Markdown bodies without rendering them. A marker is
``<!-- revbot:KIND {json} -->``; the JSON is the whole payload (head sha, trigger, rule,
fingerprint, ...). Later work reads them back from GitHub instead of keeping state of its own:
idempotency (did I already review this head for this trigger?), decoy cleanup (was this review
triggered by a decoy request?), and thread verification (which finding does this thread hold?).

Markers in text the bot did not write are never trusted: callers only parse bodies authored by
the bot (see ``guards.is_bot_login``). Inside its own bodies the bot quotes text it does not
control (a suggested line, a message quoting code), so only its trailer counts: the lines at the
very end of a body that are each one whole marker, outside any code fence. Everything the bot
writes puts its markers there, after all quoted text, so a marker-shaped string in a quote can
never be read as the bot's own.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from dataclasses import asdict, dataclass
from typing import Any

PREFIX = "revbot"


class Trigger(enum.StrEnum):
    """What asked for a review; persisted in every review marker, so values never change."""

    DECOY = "decoy"  # the decoy reviewer was requested
    TEAM = "team"  # a configured team was requested
    MENTION = "mention"  # ``@slug review``
    RERUN = "rerun"  # the check run's "Re-run"
    AUTO = "auto"  # opened / ready for review, with automatic review on
    PUSH = "push"  # new commits on a PR the bot blocks
    OVERRULE = "overrule"  # a finding was overruled (usecases.disputes)

    @classmethod
    def parse(cls, value: object) -> Trigger | None:
        """The trigger a marker names; ``None`` for one this version does not know (a newer
        version wrote it): the rest of the marker still counts, so its head is not reviewed twice."""
        return cls(value) if isinstance(value, str) and value in cls._value2member_map_ else None


_MARKER_LINE = re.compile(r"<!-- " + PREFIX + r":(?P<kind>[a-z-]+) (?P<data>\{.*\}) -->")
# CommonMark: a fence opens with 3+ backticks or tildes (indented at most 3 spaces) and closes with
# a run of the same character at least as long.
_FENCE = re.compile(r"^ {0,3}(?P<run>`{3,}|~{3,})(?P<info>.*)$")


def encode(kind: str, **data: Any) -> str:
    """A marker line. ``--`` cannot appear inside the JSON, so the comment cannot end early."""
    payload = json.dumps(data, sort_keys=True, separators=(",", ":")).replace("--", "-\\u002d")
    return f"<!-- {PREFIX}:{kind} {payload} -->"


def _outside_fences(lines: list[str]) -> list[bool]:
    """For each line, whether it is outside every code fence (an unclosed fence runs to the end)."""
    outside: list[bool] = []
    fence = ""
    for line in lines:
        opened = _FENCE.match(line)
        if not fence:
            if opened and not (opened["run"][0] == "`" and "`" in opened["info"]):
                fence = opened["run"]
                outside.append(False)
            else:
                outside.append(True)
            continue
        outside.append(False)
        run = opened["run"] if opened and not opened["info"].strip() else ""
        if run[:1] == fence[0] and len(run) >= len(fence):
            fence = ""
    return outside


def trailer(body: str | None) -> list[str]:
    """The bot's own marker lines: the run of whole-marker lines that ends the body (trailing
    blank lines aside), outside code fences, in order."""
    lines = [line.rstrip("\r") for line in (body or "").split("\n")]
    outside = _outside_fences(lines)
    end = len(lines)
    while end and not lines[end - 1].strip():
        end -= 1
    start = end
    while start and outside[start - 1] and _MARKER_LINE.fullmatch(lines[start - 1].strip()):
        start -= 1
    return [line.strip() for line in lines[start:end]]


def carries(body: str | None, marker: str) -> bool:
    """Whether ``marker`` (an ``encode`` line) is among the bot's own markers of ``body``."""
    return marker in trailer(body)


def decode_all(body: str | None, kind: str) -> list[dict[str, Any]]:
    """Every marker of ``kind`` in the trailer of ``body``, in order (malformed ones are ignored)."""
    found: list[dict[str, Any]] = []
    for line in trailer(body):
        match = _MARKER_LINE.fullmatch(line)
        if match is None or match["kind"] != kind:
            continue
        try:
            data = json.loads(match["data"])
        except ValueError:
            continue
        if isinstance(data, dict):
            found.append(data)
    return found


def decode(body: str | None, kind: str) -> dict[str, Any] | None:
    """The last marker of ``kind``: the one the bot wrote after everything it quoted."""
    found = decode_all(body, kind)
    return found[-1] if found else None


@dataclass(frozen=True, slots=True)
class ReviewMarker:
    """Carried by every review the bot posts."""

    head_sha: str
    trigger: Trigger | None  # None: a value this version does not know (see Trigger.parse)
    verdict: str  # the GitHub review event that was posted
    findings: int
    issued_at: float = 0.0  # epoch seconds, sub-second (GitHub's submitted_at has whole seconds)

    KIND = "review"

    def encode(self) -> str:
        return encode(self.KIND, **asdict(self))

    @classmethod
    def read(cls, body: str | None) -> ReviewMarker | None:
        data = decode(body, cls.KIND)
        if data is None:
            return None
        try:
            return cls(
                head_sha=str(data["head_sha"]),
                trigger=Trigger.parse(data["trigger"]),
                verdict=str(data["verdict"]),
                findings=int(data["findings"]),
                issued_at=float(data.get("issued_at", 0.0)),
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True, slots=True)
class FindingMarker:
    """Carried by every inline comment (and every body entry) for one finding."""

    head_sha: str
    rule: str
    fingerprint: str
    path: str
    line: int
    severity: str
    # rule + path + message: recognises the same problem after its line's text was edited
    # (the fingerprint, built from that text, changes then).
    key: str = ""
    content: str = ""  # rule + flagged text, no path: recognises it in a renamed file

    KIND = "finding"

    def encode(self) -> str:
        return encode(self.KIND, **asdict(self))

    @classmethod
    def read_all(cls, body: str | None) -> list[FindingMarker]:
        markers = []
        for data in decode_all(body, cls.KIND):
            try:
                markers.append(
                    cls(
                        head_sha=str(data["head_sha"]),
                        rule=str(data["rule"]),
                        fingerprint=str(data["fingerprint"]),
                        path=str(data["path"]),
                        line=int(data["line"]),
                        severity=str(data["severity"]),
                        key=str(data.get("key", "")),
                        content=str(data.get("content", "")),
                    )
                )
            except (KeyError, TypeError, ValueError):
                continue
        return markers

    @classmethod
    def read(cls, body: str | None) -> FindingMarker | None:
        """The finding an inline comment carries: its last marker."""
        found = cls.read_all(body)
        return found[-1] if found else None


def problem_key(rule: str, path: str, message: str) -> str:
    return hashlib.sha1(f"{rule}\0{path}\0{message}".encode(), usedforsecurity=False).hexdigest()[:16]
