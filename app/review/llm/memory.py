"""What the model reviewer keeps: answers by what was asked (so an unchanged file costs no
tokens twice) and tokens used per day by installation, by pull request and by person (the daily budgets).

Three tables of the store's schema (``app/store/schema.py``, migrations 3 and 4), used through
the store's ``Backend`` off the ledger's hot path (single-statement upserts). ``InMemory`` is the same
thing for the command line (``review``, ``eval``), where there is no database.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy import select

from ...store.backend import Backend
from ...store.schema import llm_answers, llm_spend, llm_usage


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


class DatabaseMemory:
    def __init__(self, backend: Backend) -> None:
        self._backend = backend

    async def answer(self, key: str) -> str | None:
        async with self._backend.read() as conn:
            row = (await conn.execute(select(llm_answers.c.answer).where(llm_answers.c.key == key))).first()
        return None if row is None else str(row[0])

    async def remember(self, key: str, answer: str) -> None:
        statement = self._backend.upsert(llm_answers).values(key=key, answer=answer, created_at=time.time())
        async with self._backend.begin() as conn:
            await conn.execute(
                statement.on_conflict_do_update(
                    index_elements=[llm_answers.c.key], set_={"answer": answer, "created_at": time.time()}
                )
            )

    async def used_today(self, installation_id: int | None, now: float) -> int:
        query = select(llm_usage.c.input_tokens + llm_usage.c.output_tokens).where(
            llm_usage.c.installation_id == (installation_id or 0), llm_usage.c.day == today(now)
        )
        async with self._backend.read() as conn:
            value = (await conn.execute(query)).scalar()
        return int(value or 0)

    async def used_by(self, scope: SpendScope, subject: str, now: float) -> int:
        query = select(llm_spend.c.tokens).where(
            llm_spend.c.scope == scope.value, llm_spend.c.subject == subject, llm_spend.c.day == today(now)
        )
        async with self._backend.read() as conn:
            value = (await conn.execute(query)).scalar()
        return int(value or 0)

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
        tokens = input_tokens + output_tokens
        charged = [
            self._backend.upsert(llm_spend)
            .values(scope=scope.value, subject=subject, day=today(now), tokens=tokens, requests=requests)
            .on_conflict_do_update(
                index_elements=[llm_spend.c.scope, llm_spend.c.subject, llm_spend.c.day],
                set_={"tokens": llm_spend.c.tokens + tokens, "requests": llm_spend.c.requests + requests},
            )
            for scope, subject in charges
        ]
        statement = self._backend.upsert(llm_usage).values(
            installation_id=installation_id or 0,
            day=today(now),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            requests=requests,
        )
        async with self._backend.begin() as conn:
            await conn.execute(
                statement.on_conflict_do_update(
                    index_elements=[llm_usage.c.installation_id, llm_usage.c.day],
                    set_={
                        "input_tokens": llm_usage.c.input_tokens + input_tokens,
                        "output_tokens": llm_usage.c.output_tokens + output_tokens,
                        "requests": llm_usage.c.requests + requests,
                    },
                )
            )
            for each in charged:  # the same transaction: every budget counts the call, or none
                await conn.execute(each)


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
