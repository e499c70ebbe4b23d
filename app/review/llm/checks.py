"""Checking the model's findings mechanically before anything is posted, and its text flattened,
capped and redacted (made inert when it is rendered, as all PR-derived text is). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..analyzers import finding as make_finding
from ..analyzers import is_python
from ..analyzers.bindings import binds_alias
from ..analyzers.secrets import redact_secrets
from ..core.diff import PatchLines, parse_patch
from ..core.model import MODEL_RULES, ChangedFile, Finding, Severity
from .schema import CATEGORIES, ModelFinding

MAX_MESSAGE_CHARS = 600
MAX_SUGGESTION_LINES = 50
SEVERITY = {"blocker": Severity.BLOCKER, "concern": Severity.CONCERN, "nit": Severity.NIT}


def clean_message(text: str) -> str:
    flat = " ".join(redact_secrets(text).split())
    if len(flat) > MAX_MESSAGE_CHARS:
        flat = flat[: MAX_MESSAGE_CHARS - 1].rstrip() + "\u2026"
    return flat


def drops_an_alias(lines: PatchLines, first: int, last: int, suggestion: str) -> bool:
    """Whether a suggestion for lines ``first..last`` deletes or rewrites one the pull request
    added that binds a module-level alias (``import a as b``, ``Old = New``): kept for callers,
    which the model cannot see. Lines it did not add are not known here, and not judged."""
    kept = {line.strip() for line in suggestion.splitlines()}
    return any(
        binds_alias(text) and text.strip() not in kept
        for number in range(first, last + 1)
        if (text := lines.added_text.get(number)) is not None
    )


def check_findings(
    proposed: Sequence[ModelFinding],
    *,
    files: Sequence[ChangedFile],
    builtin: Sequence[Finding],
    line_counts: Mapping[str, int],
    blockers: bool,
) -> tuple[list[tuple[float, Finding]], int, int]:
    """Model findings that pass the mechanical checks (a changed file, a line of it, a known
    category, a message left after cleaning), with their confidence; and how many were dropped
    and how many merged into built-in findings on the same line. Severities are capped at
    concern unless ``blockers``; a suggestion holding a marker or a secret, or deleting an
    alias (``drops_an_alias``), is dropped."""
    by_path = {s.path: s for s in files}
    builtin_lines = {(f.path, f.line) for f in builtin} | {
        (f.path, n) for f in builtin if f.start_line for n in range(f.start_line, f.line + 1)
    }
    texts: dict[str, PatchLines] = {}
    kept: list[tuple[float, Finding]] = []
    dropped, merged = 0, 0
    for m in proposed:
        changed = by_path.get(m.path)
        category = m.category.strip().lower()
        message = clean_message(m.message)
        if changed is None or category not in CATEGORIES or not message:
            dropped += 1
            continue
        lines = texts.setdefault(m.path, parse_patch(changed.patch))
        first, last = m.line, m.end_line if m.end_line and m.end_line >= m.line else m.line
        if last > line_counts.get(m.path, last):
            dropped += 1  # not a line of the file
            continue
        if last - first > MAX_SUGGESTION_LINES:
            first = last
        if (m.path, last) in builtin_lines or (m.path, first) in builtin_lines:
            merged += 1
            continue
        severity = SEVERITY[m.severity]
        if severity is Severity.BLOCKER and not blockers:
            severity = Severity.CONCERN
        suggestion = m.suggestion
        if suggestion is not None and (
            "<!--" in suggestion or "-->" in suggestion or redact_secrets(suggestion) != suggestion
        ):
            suggestion = None
        if suggestion is not None and is_python(m.path) and drops_an_alias(lines, first, last, suggestion):
            suggestion = None
        flagged = "\n".join(lines.added_text.get(n, "") for n in range(first, last + 1)) or message
        kept.append(
            (
                m.confidence,
                make_finding(
                    m.path,
                    last,
                    severity,
                    f"{MODEL_RULES}{category}",
                    f"{message} (confidence {round(m.confidence * 100)}%)",
                    flagged,
                    start_line=first if first < last else None,
                    suggestion=suggestion,
                ),
            )
        )
    return kept, dropped, merged
