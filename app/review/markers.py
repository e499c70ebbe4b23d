"""Hidden markers: what the bot writes into its own reviews and comments so it can read them back.

GitHub keeps HTML comments in Markdown bodies without rendering them. A marker is
``<!-- revbot:KIND {json} -->``; the JSON is the whole payload (head sha, trigger, rule,
fingerprint, ...). Later work reads them back from GitHub instead of keeping state of its own:
idempotency (did I already review this head for this trigger?), decoy cleanup (was this review
triggered by a decoy request?), and thread verification (which finding does this thread hold?).

Markers in text the bot did not write are never trusted: callers only parse bodies authored by
the bot (see ``guards.is_bot_login``).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from typing import Any

PREFIX = "revbot"
_MARKER = re.compile(r"<!-- " + PREFIX + r":(?P<kind>[a-z-]+) (?P<data>\{.*?\}) -->")


def encode(kind: str, **data: Any) -> str:
    """A marker line. ``--`` cannot appear inside the JSON, so the comment cannot end early."""
    payload = json.dumps(data, sort_keys=True, separators=(",", ":")).replace("--", "-\\u002d")
    return f"<!-- {PREFIX}:{kind} {payload} -->"


def decode_all(body: str | None, kind: str) -> list[dict[str, Any]]:
    """Every marker of ``kind`` in ``body`` (malformed ones are ignored)."""
    found: list[dict[str, Any]] = []
    for match in _MARKER.finditer(body or ""):
        if match["kind"] != kind:
            continue
        try:
            data = json.loads(match["data"])
        except ValueError:
            continue
        if isinstance(data, dict):
            found.append(data)
    return found


def decode(body: str | None, kind: str) -> dict[str, Any] | None:
    found = decode_all(body, kind)
    return found[0] if found else None


@dataclass(frozen=True, slots=True)
class ReviewMarker:
    """Carried by every review the bot posts."""

    head_sha: str
    trigger: str  # decoy | team | mention | rerun | auto | push
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
                trigger=str(data["trigger"]),
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
                    )
                )
            except (KeyError, TypeError, ValueError):
                continue
        return markers


def problem_key(rule: str, path: str, message: str) -> str:
    return hashlib.sha1(f"{rule}\0{path}\0{message}".encode(), usedforsecurity=False).hexdigest()[:16]
