"""Disputes remembered for a repository ("learnings"): what a later review leaves out.

A maintainer's dispute with ``@slug dismiss --always`` (or any accepted dispute when the
repository sets ``review.learn: true``) is stored here, keyed by the finding's rule, a path
pattern (its directory and extension) and its normalised code line (as a digest: the line may
hold a secret; what is listed is the line with secrets redacted). One table of the store's schema
(``app/store/schema.py``, migration 4), used through the store's ``Backend`` off the ledger's hot
path, as ``app/review/llm/memory.py`` keeps the model's answers. ``InMemoryLearnings`` is the same thing
without a database (tests, the command line).

``prompt_context`` is the hook for the model reviewer: the repository's learnings as plain lines
for its prompt, from the database, never from the pull request (the caller fences them).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from sqlalchemy import delete, select

from ...store.backend import Backend
from ...store.schema import learnings as table
from ..analyzers.secrets import redact_secrets
from ..core.model import Severity
from ..engine.inert import code
from .overrule import LearningKey, PathPattern, normalised_line

MAX_EXAMPLE_CHARS = 200
MAX_REASON_CHARS = 300
MAX_PER_REPO = 500  # a later review compares every finding with them: bounded


@dataclass(frozen=True, slots=True)
class Learning:
    key: LearningKey
    example: str  # the code line, secrets redacted, capped
    reason: str
    created_by: str
    source: str  # owner/name#N
    number: int = 0  # the id ``forget N`` takes; 0 until stored
    created_at: float = 0.0

    @classmethod
    def new(
        cls,
        *,
        rule: str,
        path: str,
        line_text: str,
        reason: str,
        created_by: str,
        source: str,
        severity: Severity | None = None,
        content: str = "",
    ) -> Learning:
        """``content``: the finding's content digest, what the learning recognises (its evidence);
        without it, the code line. ``severity``: the finding's, the most a learning withdraws."""
        key = (
            LearningKey.of_content(rule, path, content, severity)
            if content and severity is not None
            else LearningKey.of(rule, path, line_text, severity)
        )
        return cls(
            key=key,
            example=redact_secrets(normalised_line(line_text))[:MAX_EXAMPLE_CHARS],
            reason=" ".join(redact_secrets(reason).split())[:MAX_REASON_CHARS],
            created_by=created_by,
            source=source,
        )

    def describe(self) -> str:
        """One line for ``@slug learnings`` and the command line (plain text: callers escape)."""
        why = f": {self.reason}" if self.reason else ""
        return (
            f"#{self.number} {self.key.rule} in {code(str(self.key.pattern))} on {code(self.example)} "
            f"(by {self.created_by} in {self.source}{why})"
        )


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


class DatabaseLearnings:
    def __init__(self, backend: Backend) -> None:
        self._backend = backend

    @staticmethod
    def _learning(row: Any) -> Learning:
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
            number=int(row.id),
            created_at=float(row.created_at),
        )

    def _same_key(self, repo: str, key: LearningKey) -> Any:
        return select(table).where(
            table.c.repo == _repo(repo),
            table.c.rule == key.rule,
            table.c.path_dir == key.pattern.directory,
            table.c.path_ext == key.pattern.extension,
            table.c.line_sha == key.line_sha,
        )

    async def remember(self, repo: str, learning: Learning) -> Learning:
        insert = self._backend.upsert(table).values(
            repo=_repo(repo),
            rule=learning.key.rule,
            path_dir=learning.key.pattern.directory,
            path_ext=learning.key.pattern.extension,
            line_sha=learning.key.line_sha,
            severity=int(learning.key.severity) if learning.key.severity is not None else None,
            example=learning.example,
            reason=learning.reason,
            created_by=learning.created_by,
            source=learning.source,
            created_at=time.time(),
        )
        async with self._backend.begin() as conn:
            await conn.execute(insert.on_conflict_do_nothing())
            row = (await conn.execute(self._same_key(repo, learning.key))).one()
        return self._learning(row)

    async def of_repo(self, repo: str) -> list[Learning]:
        query = select(table).where(table.c.repo == _repo(repo)).order_by(table.c.id).limit(MAX_PER_REPO)
        async with self._backend.read() as conn:
            rows = (await conn.execute(query)).all()
        return [self._learning(row) for row in rows]

    async def forget(self, repo: str, number: int) -> Learning | None:
        where = (table.c.repo == _repo(repo), table.c.id == number)
        async with self._backend.begin() as conn:
            row = (await conn.execute(select(table).where(*where))).first()
            if row is None:
                return None
            await conn.execute(delete(table).where(*where))
        return self._learning(row)


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


def prompt_context(learned: Sequence[Learning]) -> str:
    """The repository's remembered disputes, for the model reviewer's prompt (to be fenced as data
    by the caller): findings its maintainers said are not problems, so the model should not raise
    them again."""
    return "\n".join(
        f"- {item.key.rule} in {item.key.pattern}: `{item.example}`"
        + (f" ({item.reason})" if item.reason else "")
        for item in learned
    )
