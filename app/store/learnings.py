"""Disputes remembered for a repository, as rows of ``learnings`` (migration 4).

What a learning means (its key, what a later review leaves out) is the review engine's
(``app/review/rounds/learnings.py``); the use cases turn it into a ``StoredLearning`` and back
(``app/usecases/learnings.py``), so the engine never imports the store. Off the ledger's hot path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select

from .backend import Backend
from .schema import learnings as table


@dataclass(frozen=True, slots=True)
class StoredLearning:
    """One row: the key (rule, path pattern, line digest, severity) and what is listed."""

    rule: str
    path_dir: str
    path_ext: str
    line_sha: str
    severity: int | None
    example: str
    reason: str
    created_by: str
    source: str
    number: int = 0  # the row's id; 0 until stored
    created_at: float = 0.0


def _stored(row: Any) -> StoredLearning:
    return StoredLearning(
        rule=row.rule,
        path_dir=row.path_dir,
        path_ext=row.path_ext,
        line_sha=row.line_sha,
        severity=row.severity,
        example=row.example,
        reason=row.reason,
        created_by=row.created_by,
        source=row.source,
        number=int(row.id),
        created_at=float(row.created_at),
    )


class LearningsTable:
    """``repo`` is the key the caller chose (``owner/name``, lower case)."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend

    async def insert_once(self, repo: str, learning: StoredLearning) -> StoredLearning:
        """Insert it unless the same key is stored; the stored row either way."""
        insert = self._backend.upsert(table).values(
            repo=repo,
            rule=learning.rule,
            path_dir=learning.path_dir,
            path_ext=learning.path_ext,
            line_sha=learning.line_sha,
            severity=learning.severity,
            example=learning.example,
            reason=learning.reason,
            created_by=learning.created_by,
            source=learning.source,
            created_at=time.time(),
        )
        same_key = select(table).where(
            table.c.repo == repo,
            table.c.rule == learning.rule,
            table.c.path_dir == learning.path_dir,
            table.c.path_ext == learning.path_ext,
            table.c.line_sha == learning.line_sha,
        )
        async with self._backend.begin() as conn:
            await conn.execute(insert.on_conflict_do_nothing())
            row = (await conn.execute(same_key)).one()
        return _stored(row)

    async def of_repo(self, repo: str, *, limit: int) -> list[StoredLearning]:
        """The repository's first ``limit`` rows, oldest first."""
        query = select(table).where(table.c.repo == repo).order_by(table.c.id).limit(limit)
        async with self._backend.read() as conn:
            rows = (await conn.execute(query)).all()
        return [_stored(row) for row in rows]

    async def delete(self, repo: str, number: int) -> StoredLearning | None:
        """Remove the repository's row ``number``; None when it has none of that number."""
        where = (table.c.repo == repo, table.c.id == number)
        async with self._backend.begin() as conn:
            row = (await conn.execute(select(table).where(*where))).first()
            if row is None:
                return None
            await conn.execute(delete(table).where(*where))
        return _stored(row)
