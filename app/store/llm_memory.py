"""The model reviewer's memory in the database: its answers by what was asked, and the tokens it
used per day by installation, by pull request and by person (``llm_answers``, ``llm_usage``,
``llm_spend``; migrations 3 and 5).

``DatabaseMemory`` is the engine's ``Memory`` (``app/review/llm/memory.py``) for ``serve``, which
hands it to the reviewer it builds: the engine records what it asks and spends through that
protocol and never sees a table. It takes plain values (a spend scope is its string; the engine's
``SpendScope`` is a ``StrEnum``), since the store sits below the engine. Single-statement upserts,
off the ledger's hot path.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import select

from .backend import Backend
from .schema import llm_answers, llm_spend, llm_usage


def utc_day(now: float) -> str:
    """The ``day`` column of the usage tables (a budget is per UTC day)."""
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")


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
            llm_usage.c.installation_id == (installation_id or 0), llm_usage.c.day == utc_day(now)
        )
        async with self._backend.read() as conn:
            value = (await conn.execute(query)).scalar()
        return int(value or 0)

    async def used_by(self, scope: str, subject: str, now: float) -> int:
        query = select(llm_spend.c.tokens).where(
            llm_spend.c.scope == str(scope), llm_spend.c.subject == subject, llm_spend.c.day == utc_day(now)
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
        charges: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Count a call against the installation and against each ``(scope, subject)`` charged."""
        tokens = input_tokens + output_tokens
        charged = [
            self._backend.upsert(llm_spend)
            .values(scope=str(scope), subject=subject, day=utc_day(now), tokens=tokens, requests=requests)
            .on_conflict_do_update(
                index_elements=[llm_spend.c.scope, llm_spend.c.subject, llm_spend.c.day],
                set_={"tokens": llm_spend.c.tokens + tokens, "requests": llm_spend.c.requests + requests},
            )
            for scope, subject in charges
        ]
        statement = self._backend.upsert(llm_usage).values(
            installation_id=installation_id or 0,
            day=utc_day(now),
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
