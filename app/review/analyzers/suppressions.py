"""Suppressions a pull request adds: a comment that tells a tool to say nothing (``# noqa``,
``# ruff: noqa``, ``# zizmor: ignore[...]``) is the repository's convention when the base has
it, and the pull request's own say when it sits on a line the pull request adds. The tools run
with those comments ignored too; what only they hid is compared here: a blocker so hidden is
still a blocker of the pull request ("suppressed by this pull request"), a concern or a nit
stays suppressed and is listed, collapsed. Pure: the analyzers run the tools.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..core.model import Finding, Severity

# ruff's (and flake8's) directives, as ruff reads them: on the flagged line, or for the file.
_NOQA = re.compile(r"#\s*noqa\b", re.IGNORECASE)
_FILE_NOQA = re.compile(r"#\s*(?:ruff|flake8)\s*:\s*noqa\b", re.IGNORECASE)
_ZIZMOR = re.compile(r"#\s*zizmor\s*:\s*ignore\b", re.IGNORECASE)
# shellcheck's and hadolint's directives: a comment that silences the line (or command) below.
SHELLCHECK_DIRECTIVE = re.compile(r"(#\s*shellcheck)(\s+disable\s*=)", re.IGNORECASE)
HADOLINT_DIRECTIVE = re.compile(r"(#\s*hadolint)(\s+ignore\s*=)", re.IGNORECASE)


def without_added_directives(text: str, added: Mapping[int, str], directive: re.Pattern[str]) -> str | None:
    """``text`` with the directives on the lines the pull request added made inert (renamed, the
    lines kept, so every line number stays), for a second run; None when it added none. The
    base's directives stay: the repository's convention."""
    lines = text.split("\n")
    changed = False
    for number in added:
        if 0 < number <= len(lines) and directive.search(lines[number - 1]):
            lines[number - 1] = directive.sub(r"# inert-for-the-bot\2", lines[number - 1])
            changed = True
    return "\n".join(lines) if changed else None


def adds_noqa(added: Mapping[int, str]) -> bool:
    """Whether the pull request adds any ``noqa`` directive to the file (worth a second run)."""
    return any(_NOQA.search(text) or _FILE_NOQA.search(text) for text in added.values())


def noqa_added_for(rows: Sequence[str], added: Mapping[int, str], line: int) -> str | None:
    """The directive the pull request added that hides a ruff diagnostic on ``line``: a line-level
    ``# noqa`` on that added line, or a file-level ``# ruff: noqa`` on any added line. None: the
    diagnostic was hidden by what the base already had (a file-level directive on a line the
    pull request did not add: honoured). ``rows``: the file at head."""
    if any(_FILE_NOQA.search(text) for number, text in enumerate(rows, 1) if number not in added):
        return None
    for number in sorted(added):
        if _FILE_NOQA.search(added[number]):
            return f"`# ruff: noqa` (line {number})"
    text = added.get(line)
    if text is not None and _NOQA.search(text):
        return f"`# noqa` (line {line})"
    return None


def zizmor_ignore_added(added: Mapping[int, str], line: int) -> str | None:
    """The ``# zizmor: ignore[...]`` comment the pull request added on ``line``, if any."""
    text = added.get(line)
    if text is not None and _ZIZMOR.search(text):
        return f"`# zizmor: ignore` (line {line})"
    return None


def suppressed_by_pull_request(finding: Finding, directive: str) -> Finding | None:
    """A blocker the pull request's own directive hid: the finding, saying so (None for a
    concern or a nit: it stays suppressed, as the repository's convention allows)."""
    if finding.severity is not Severity.BLOCKER:
        return None
    return replace(
        finding,
        message=f"Suppressed by this pull request ({directive}), yet a blocker: {finding.message}",
    )
