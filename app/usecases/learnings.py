"""Where the repository's learnings are kept: the ``Learnings`` the use cases read before a
review and write when a dispute is accepted (``overrules``, ``disputes``).

The engine's ``Learning`` (``app/review/rounds/learnings.py``) is what a learning means; it
reaches the review as data (``PullState.learned``). ``DatabaseLearnings`` keeps them in the
store's ``learnings`` table (``app/store/learnings.py``) as plain rows; ``InMemoryLearnings`` is
the same without a database (tests, the command line).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Protocol

from ..review.core.model import Severity
from ..review.rounds.learnings import MAX_PER_REPO, Learning
from ..review.rounds.overrule import LearningKey, PathPattern
from ..store.backend import Backend
from ..store.learnings import LearningsTable, StoredLearning


class Learnings(Protocol):
    async def remember(self, repo: str, learning: Learning) -> Learning:
        """Store it (or return the same key's existing learning); the stored one has its number."""
        ...

    async def of_repo(self, repo: str) -> list[Learning]: ...

    async def forget(self, repo: str, number: int) -> Learning | None:
        """Remove the repository's learning ``number``; None when it has none of that number."""
        ...


def _repo(repo: str) -> str:
    return repo.lower()


def _row(learning: Learning) -> StoredLearning:
    key = learning.key
    return StoredLearning(
        rule=key.rule,
        path_dir=key.pattern.directory,
        path_ext=key.pattern.extension,
        line_sha=key.line_sha,
        severity=int(key.severity) if key.severity is not None else None,
        example=learning.example,
        reason=learning.reason,
        created_by=learning.created_by,
        source=learning.source,
    )


def _learning(row: StoredLearning) -> Learning:
    return Learning(
        key=LearningKey(
            row.rule,
            PathPattern(row.path_dir, row.path_ext),
            row.line_sha,
            Severity(row.severity) if row.severity is not None else None,
        ),
        example=row.example,
        reason=row.reason,
        created_by=row.created_by,
        source=row.source,
        number=row.number,
        created_at=row.created_at,
    )


class DatabaseLearnings:
    def __init__(self, backend: Backend) -> None:
        self._table = LearningsTable(backend)

    async def remember(self, repo: str, learning: Learning) -> Learning:
        return _learning(await self._table.insert_once(_repo(repo), _row(learning)))

    async def of_repo(self, repo: str) -> list[Learning]:
        return [_learning(row) for row in await self._table.of_repo(_repo(repo), limit=MAX_PER_REPO)]

    async def forget(self, repo: str, number: int) -> Learning | None:
        row = await self._table.delete(_repo(repo), number)
        return None if row is None else _learning(row)


@dataclass
class InMemoryLearnings:
    rows: dict[str, list[Learning]] = field(default_factory=dict)
    next_number: int = 1

    async def remember(self, repo: str, learning: Learning) -> Learning:
        kept = self.rows.setdefault(_repo(repo), [])
        for existing in kept:
            if existing.key == learning.key:
                return existing
        stored = replace(learning, number=self.next_number, created_at=time.time())
        self.next_number += 1
        kept.append(stored)
        return stored

    async def of_repo(self, repo: str) -> list[Learning]:
        return list(self.rows.get(_repo(repo), []))[:MAX_PER_REPO]

    async def forget(self, repo: str, number: int) -> Learning | None:
        kept = self.rows.get(_repo(repo), [])
        for existing in kept:
            if existing.number == number:
                kept.remove(existing)
                return existing
        return None
