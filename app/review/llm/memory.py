"""What the model reviewer keeps: answers by what was asked (so an unchanged file costs no
tokens twice) and tokens used per day by installation, by pull request and by person (the daily budgets).

The engine only sees the ``Memory`` protocol, the one thing it records into during a review; for
``serve`` the composition root hands it ``app/store/llm_memory.py``'s ``DatabaseMemory`` (three
tables of the store's schema), so the engine never imports the store. ``InMemory`` is the same
thing for the command line (``review``, ``eval``), where there is no database.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol


def today(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")


class SpendScope(enum.StrEnum):
    """Who else a model call is counted against, beside the installation."""

    PULL = "pull"  # subject: "owner/repo#N"
    PERSON = "person"  # subject: "installation:login" (casefolded)


Charge = tuple[SpendScope, str]


class Memory(Protocol):
    async def answer(self, key: str) -> str | None: ...

    async def remember(self, key: str, answer: str) -> None: ...

    async def used_today(self, installation_id: int | None, now: float) -> int: ...

    async def used_by(self, scope: SpendScope, subject: str, now: float) -> int: ...

    async def spend(
        self,
        installation_id: int | None,
        now: float,
        *,
        input_tokens: int,
        output_tokens: int,
        requests: int,
        charges: Sequence[Charge] = (),
    ) -> None: ...


@dataclass
class InMemory:
    answers: dict[str, str] = field(default_factory=dict)
    usage: dict[tuple[int, str], int] = field(default_factory=dict)
    charged: dict[tuple[SpendScope, str, str], int] = field(default_factory=dict)

    async def answer(self, key: str) -> str | None:
        return self.answers.get(key)

    async def remember(self, key: str, answer: str) -> None:
        self.answers[key] = answer

    async def used_today(self, installation_id: int | None, now: float) -> int:
        return self.usage.get((installation_id or 0, today(now)), 0)

    async def used_by(self, scope: SpendScope, subject: str, now: float) -> int:
        return self.charged.get((scope, subject, today(now)), 0)

    async def spend(
        self,
        installation_id: int | None,
        now: float,
        *,
        input_tokens: int,
        output_tokens: int,
        requests: int,
        charges: Sequence[Charge] = (),
    ) -> None:
        key = (installation_id or 0, today(now))
        self.usage[key] = self.usage.get(key, 0) + input_tokens + output_tokens
        for scope, subject in charges:
            day = (scope, subject, today(now))
            self.charged[day] = self.charged.get(day, 0) + input_tokens + output_tokens
