"""Merge conflict markers left in added lines: always a blocker.

``<<<<<<<``, ``|||||||`` (diff3 base) and ``>>>>>>>`` at the start of a line, followed by a space
or nothing; ``=======`` alone on a line only counts when the same file's added lines also hold a
``<<<<<<<`` or ``>>>>>>>`` marker, since it is also a Markdown/reStructuredText underline.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..core.model import ChangedFile, Finding, Severity
from .base import AnalysisInput, AnalyzerOutput, Rule, finding

__all__ = ["RULE", "ConflictMarkerAnalyzer", "conflict_lines"]

RULE = "conflict-marker"
_SIDE_MARKER = re.compile(r"^(?:<{7}|>{7}|\|{7})(?:[ \t].*)?$")
_OPENING_OR_CLOSING = re.compile(r"^(?:<{7}|>{7})(?:[ \t].*)?$")
_SEPARATOR = "======="


def conflict_lines(added: Mapping[int, str]) -> list[tuple[int, str]]:
    """(line, marker) for every conflict marker among a file's added lines."""
    has_sides = any(_OPENING_OR_CLOSING.match(text) for text in added.values())
    out: list[tuple[int, str]] = []
    for number in sorted(added):
        text = added[number]
        if _SIDE_MARKER.match(text):
            out.append((number, text[:7]))
        elif has_sides and text.rstrip() == _SEPARATOR:
            out.append((number, _SEPARATOR))
    return out


class ConflictMarkerAnalyzer:
    name = "conflicts"
    tools: tuple[str, ...] = ()
    differential: bool = False
    rules: tuple[Rule, ...] = (
        Rule(
            RULE,
            Severity.BLOCKER,
            "a merge conflict marker (`<<<<<<<`, `=======`, `>>>>>>>`) on an added line",
        ),
    )

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        return []

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        findings: list[Finding] = []
        for item in batch.files:
            for number, marker in conflict_lines(item.lines.added_text):
                findings.append(
                    finding(
                        item.path,
                        number,
                        Severity.BLOCKER,
                        RULE,
                        f"Unresolved merge conflict marker `{marker}`.",
                        item.lines.added_text[number],
                    )
                )
        return AnalyzerOutput(findings=findings)
