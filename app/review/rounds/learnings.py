"""Disputes remembered for a repository ("learnings"): what a later review leaves out.

A maintainer's dispute with ``@slug dismiss --always`` (or any accepted dispute when the
repository sets ``review.learn: true``) is remembered, keyed by the finding's rule, a path
pattern (its directory and extension) and its normalised code line (as a digest: the line may
hold a secret; what is listed is the line with secrets redacted). This module is what a learning
means; where learnings are kept is the use cases' (``app/usecases/learnings.py``, over the
store's ``learnings`` table), and they reach the review as data, read before it starts.

``prompt_context`` is the hook for the model reviewer: the repository's learnings as plain lines
for its prompt, from the database, never from the pull request (the caller fences them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..analyzers.secrets import redact_secrets
from ..core.model import Severity
from ..engine.inert import code
from .overrule import LearningKey, normalised_line

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


def prompt_context(learned: Sequence[Learning]) -> str:
    """The repository's remembered disputes, for the model reviewer's prompt (to be fenced as data
    by the caller): findings its maintainers said are not problems, so the model should not raise
    them again."""
    return "\n".join(
        f"- {item.key.rule} in {item.key.pattern}: `{item.example}`"
        + (f" ({item.reason})" if item.reason else "")
        for item in learned
    )
