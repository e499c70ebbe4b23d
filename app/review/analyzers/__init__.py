"""The built-in reviewer's analyzers and what they share.

An analyzer says which file contents it needs (``wanted_paths``), before anything is read — the
engine reads the union once — and then turns the changed files into ``Finding``s (``analyse``).
Analyzers never talk to GitHub and never execute the pull request's code.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol

from ..diff import PatchLines
from ..lintconfig import LintConfig
from ..model import ChangedFile, FileContent, Finding, RepoTree, ReviewSettings, Severity, Skipped

__all__ = [
    "AnalysisInput",
    "Analyzer",
    "AnalyzerOutput",
    "FileUnderReview",
    "default_analyzers",
    "finding",
    "fingerprint",
    "is_js",
    "is_python",
    "is_test_path",
    "strip_python_noise",
]

PYTHON_SUFFIXES = (".py", ".pyi")
# A directory where the ruff versions repositories pin are installed and kept; unset: not installed.
RUFF_VERSIONS_ENV = "REVIEW_RUFF_VERSIONS"
JS_SUFFIXES = (".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".vue", ".svelte")


@dataclass(frozen=True, slots=True)
class FileUnderReview:
    file: ChangedFile
    lines: PatchLines
    content: FileContent | None = None  # only when some analyzer asked for it

    @property
    def path(self) -> str:
        return self.file.path

    @property
    def text(self) -> str | None:
        return None if self.content is None else self.content.text


@dataclass(frozen=True, slots=True)
class AnalysisInput:
    files: tuple[FileUnderReview, ...]  # selected files with a patch
    unpatched: tuple[FileUnderReview, ...]  # selected files GitHub gave no patch for
    contents: Mapping[str, FileContent | None]  # everything read, config files included
    settings: ReviewSettings = field(default_factory=ReviewSettings)
    tree: RepoTree | None = None  # the repository at head, when it could be listed
    lint: LintConfig = field(default_factory=LintConfig)  # the repository's own lint configuration
    # The base side of the changed files that had one (by their base path), when it could be read.
    base: Mapping[str, FileContent | None] = field(default_factory=dict)

    def linted(self, item: FileUnderReview) -> bool:
        """Whether the repository lints this file (lint-style checks skip the others)."""
        return self.lint.excluded(item.path) is None


@dataclass(slots=True)
class AnalyzerOutput:
    findings: list[Finding] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)  # a check that could not run on a file
    notes: list[str] = field(default_factory=list)  # for the summary
    incomplete: bool = False  # some file was not fully checked: never approve on this basis


class Analyzer(Protocol):
    name: str

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        """Paths whose head contents this analyzer needs (config files included)."""
        ...

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput: ...


def fingerprint(rule: str, path: str, text: str) -> str:
    """Stable across line shifts: the rule, the path and the flagged text without surrounding
    whitespace (several lines: each stripped, joined with newlines)."""
    normalised = "\n".join(line.strip() for line in text.split("\n")).strip()
    return hashlib.sha1(f"{rule}\0{path}\0{normalised}".encode()).hexdigest()[:16]


def finding(
    path: str,
    line: int,
    severity: Severity,
    rule: str,
    message: str,
    text: str,
    *,
    start_line: int | None = None,
    suggestion: str | None = None,
    inline: bool = True,
) -> Finding:
    """A ``Finding`` whose fingerprint is computed from ``text``, the flagged line(s)."""
    return Finding(
        path=path,
        line=line,
        severity=severity,
        rule=rule,
        message=message,
        fingerprint=fingerprint(rule, path, text),
        start_line=start_line,
        suggestion=suggestion,
        inline=inline,
    )


def is_python(path: str) -> bool:
    return path.endswith(PYTHON_SUFFIXES)


def is_js(path: str) -> bool:
    return path.endswith(JS_SUFFIXES)


def is_test_path(path: str) -> bool:
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else path
    return (
        any(part in ("tests", "test", "testing", "__tests__") for part in parts[:-1])
        or name.startswith("test_")
        or name.endswith(("_test.py", "_tests.py"))
        or name == "conftest.py"
        or re.search(r"\.(?:test|spec)\.[cm]?[jt]sx?$", name) is not None
    )


_PY_STRING = re.compile(
    r"""(?i)[rbuf]{0,2}(?:'''.*?'''|\"\"\".*?\"\"\"|'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")"""
)


def strip_python_noise(line: str) -> str:
    """The line with string literals emptied and any comment removed (a one-line approximation)."""
    code = _PY_STRING.sub('""', line)
    hash_at = code.find("#")
    return code if hash_at < 0 else code[:hash_at]


def default_analyzers() -> list[Analyzer]:
    from .api import ApiBreakAnalyzer
    from .conflicts import ConflictMarkerAnalyzer
    from .debug import DebugAnalyzer
    from .hygiene import HygieneAnalyzer
    from .injection import InjectionAnalyzer
    from .likely_bugs import LikelyBugAnalyzer
    from .python import PythonAnalyzer
    from .secrets import SecretsAnalyzer

    versions = os.environ.get(RUFF_VERSIONS_ENV, "").strip()
    python = PythonAnalyzer(ruff_versions=Path(versions) if versions else None)
    return [
        python,
        SecretsAnalyzer(),
        ConflictMarkerAnalyzer(),
        DebugAnalyzer(),
        HygieneAnalyzer(),
        InjectionAnalyzer(),
        ApiBreakAnalyzer(),
        LikelyBugAnalyzer(),
    ]
