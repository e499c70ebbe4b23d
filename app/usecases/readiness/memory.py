"""The bot's own memory on a pull request it follows: the marker of its readiness comment and
check run (the heads it saw and when, the checks it saw fail, when CI turned green)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...review.rounds.markers import encode
from . import decide as rd

MARKER = "readiness"
HISTORY = 20  # heads and failures kept in the marker


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
