"""Likely bugs a linter sees, whatever rules the repository selects: a debugger left in (ruff
``T10``), pylint's errors (``PLE``), a mutable default argument (``B006``), a comparison whose
result is thrown away (``B015``) and a useless expression (``B018``). Concerns, on the lines the
pull request changed (the engine keeps only those). ``B023`` and ``ARG`` are left out: measured
noisy on real history.

One extra ruff run over the analysed Python files with only these rules (its own configuration at
the root, so the repository's cannot turn them off; ``# noqa`` still silences one, and files the
repository keeps out of linting are left out). Rule names are ruff's (``python/B006``), so a rule
the repository also selects makes one finding, not two (the engine merges them by fingerprint).
Debuggers the debug analyzer already reports (``pdb``, ``ipdb``, ``breakpoint()``) are left to it.
In tests, ``B015`` and ``B018`` are the point (``pytest.raises`` around an expression): not reported.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.model import ChangedFile, Finding, Severity
from .base import AnalysisInput, AnalyzerOutput, Rule, finding, is_python, is_test_path
from .python import is_syntax_error
from .ruff_runner import (
    RUFF_TIMEOUT,
    RuffError,
    RuffUnavailableError,
    below_configs,
    find_ruff,
    lint_in_parts,
    run_ruff,
    safe_relative,
)

__all__ = ["LIKELY_BUG_SELECT", "LikelyBugAnalyzer", "likely_bug_findings"]

LIKELY_BUG_SELECT = ("T10", "PLE", "B006", "B015", "B018")
CONFIG = f"[lint]\nselect = [{', '.join(repr(code) for code in LIKELY_BUG_SELECT)}]\n"
TEST_EXEMPT = frozenset({"B015", "B018"})
_KNOWN_DEBUGGER = re.compile(r"\b(?:i?pdb|breakpoint)\b")


def likely_bug_findings(
    diagnostics: Sequence[Mapping[str, Any]], rows: Mapping[str, Sequence[str]]
) -> list[Finding]:
    """Ruff's diagnostics (filenames as repository paths) -> concerns, ``rows`` being each
    file's lines (``FileUnderReview.rows``). Pure."""
    found = []
    for diagnostic in diagnostics:
        path, code = diagnostic.get("filename"), diagnostic.get("code")
        location = diagnostic.get("location")
        row = location.get("row") if isinstance(location, dict) else None
        if (
            not isinstance(path, str)
            or not isinstance(code, str)
            or not isinstance(row, int)
            or path not in rows
        ):
            continue
        if is_syntax_error(code) or (code in TEST_EXEMPT and is_test_path(path)):
            continue
        lines = rows[path]
        line_text = lines[row - 1] if 0 < row <= len(lines) else ""
        if code.startswith("T10") and _KNOWN_DEBUGGER.search(line_text):
            continue  # the debug analyzer's finding
        message = str(diagnostic.get("message") or "").strip().splitlines()
        short = message[0] if message else "problem reported by ruff"
        found.append(finding(path, row, Severity.CONCERN, f"python/{code}", f"{short} ({code})", line_text))
    return found


class LikelyBugAnalyzer:
    """Implements ``analyzers.Analyzer``."""

    name = "likely-bugs"
    tools: tuple[str, ...] = ()  # the installed ruff: these rules are stable in every supported version
    differential: bool = True
    rules: tuple[Rule, ...] = (
        Rule(
            "python/<T10, PLE, B006, B015, B018 code>",
            Severity.CONCERN,
            "likely bugs whatever rules the repository selects: a debugger, pylint errors, a mutable "
            "default, a pointless comparison, a useless expression",
        ),
    )

    def __init__(self, *, time_limit: float = RUFF_TIMEOUT, command: Sequence[str] | None = None) -> None:
        self.time_limit = time_limit
        self.command = command

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        return [f.path for f in files if is_python(f.path)]

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        out = AnalyzerOutput()
        files = {
            item.path: item
            for item in batch.files
            if is_python(item.path)
            and item.text is not None
            and item.lines.added
            and batch.linted(item)
            and safe_relative(item.path) is not None  # (the Python check says why it skipped one)
        }
        if not files:
            return out
        configs = {".ruff.toml": CONFIG}
        blocked = set(below_configs(files, configs))  # the Python check says why it skipped them
        texts = {
            path: item.text for path, item in files.items() if item.text is not None and path not in blocked
        }
        command = list(self.command) if self.command is not None else find_ruff()

        async def lint(part: Mapping[str, str]) -> list[dict[str, Any]]:
            return await run_ruff(part, configs, time_limit=self.time_limit, command=command)

        try:
            diagnostics = await lint(texts)
        except RuffUnavailableError:
            raise
        except RuffError as exc:
            if not exc.crashed or len(texts) < 2:
                # The main Python check reports what stops ruff; this one only says it did not run.
                out.notes.append(f"likely-bug checks could not run ({exc})")
                out.incomplete = True
                return out
            diagnostics, failed = await lint_in_parts(texts, lint)  # the others still count
            if failed:
                out.incomplete = True
                out.notes.append(f"likely-bug checks could not run on {len(failed)} of {len(texts)} files")
        out.findings.extend(
            likely_bug_findings(diagnostics, {path: item.rows for path, item in files.items()})
        )
        out.notes.append(f"likely-bug checks ({', '.join(LIKELY_BUG_SELECT)}) run")
        return out
