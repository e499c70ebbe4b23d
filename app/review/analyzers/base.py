"""What the analyzers share: their interface, their input and output, the rule catalogue's
entries, and small helpers. The package (``analyzers/__init__.py``) composes the analyzers;
each analyzer imports only this module, never the package.

An analyzer says which file contents it needs (``wanted_paths``), before anything is read — the
engine reads the union once — and then turns the changed files into ``Finding``s (``analyse``).
It declares the rules it reports (``rules``: id, severity, one line, file-level or not), which the
engine reads and ``python -m app rules`` lists. Analyzers never talk to GitHub and never execute
the pull request's code.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Protocol

from ..core.diff import PatchLines
from ..core.lintconfig import LintConfig
from ..core.model import ChangedFile, FileContent, Finding, RepoTree, ReviewSettings, Severity, Skipped

__all__ = [
    "AnalysisInput",
    "Analyzer",
    "AnalyzerOutput",
    "FileUnderReview",
    "Rule",
    "finding",
    "fingerprint",
    "is_js",
    "is_python",
    "is_test_path",
    "safe_relative",
    "split_rows",
    "strip_python_noise",
    "unreadable",
]

PYTHON_SUFFIXES = (".py", ".pyi")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
JS_SUFFIXES = (".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".vue", ".svelte")


def split_rows(text: str | None) -> tuple[str, ...]:
    """A file's lines as ruff numbers its rows (any line break ends one)."""
    if text is None:
        return ()
    rows = _LINE_BREAK.split(text)
    if rows and rows[-1] == "":
        rows.pop()
    return tuple(rows)


@dataclass(frozen=True, slots=True)
class FileUnderReview:
    file: ChangedFile
    lines: PatchLines
    content: FileContent | None = None  # only when some analyzer asked for it
    # Its head text split into lines once, for every analyzer (row ``n`` is ``rows[n - 1]``).
    rows: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", split_rows(self.text))

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
    tools: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # name -> command (``Analyzer.tools``)
    title: str = ""  # the pull request's own text (untrusted, like its files)
    body: str = ""
    author: str = ""  # the pull request's author's login (GitHub's word: a bot's is ``name[bot]``)
    # The base side of the changed files that had one (by their base path), when it could be read.
    base: Mapping[str, FileContent | None] = field(default_factory=dict)
    # The lint configuration files at the base, which ``lint`` was read from (``contents`` holds
    # the head's side of those the pull request changed, for the ``config`` analyzer).
    configs: Mapping[str, FileContent | None] = field(default_factory=dict)
    # Whether ``files`` are the base sides, analysed to tell what stood there before
    # (``core.differential``): what an analyzer reports of one is cached across pull requests by
    # its text, so it must not depend on this pull request (its author, its other files).
    at_base: bool = False

    def linted(self, item: FileUnderReview) -> bool:
        """Whether the repository lints this file (lint-style checks skip the others)."""
        return self.lint.excluded(item.path) is None


@dataclass(slots=True)
class AnalyzerOutput:
    findings: list[Finding] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)  # a check that could not run on a file
    notes: list[str] = field(default_factory=list)  # for the summary
    incomplete: bool = False  # some file was not fully checked: never approve on this basis
    # Concerns and nits only a suppression the pull request added hides: listed, collapsed
    # (a blocker so hidden is a finding: ``suppressions``).
    suppressed: list[Finding] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Rule:
    """One thing an analyzer can say: what the catalogue (``python -m app rules``) lists."""

    id: str  # as in ``Finding.rule``; a family ends in ``<...>`` (``python/<ruff code>``)
    severity: Severity | None  # the severity it is reported at (None: it depends, see description)
    description: str  # one line
    file_level: bool = False  # reported wherever it is in the file, not only on changed lines


class Analyzer(Protocol):
    """``wanted_paths`` runs in the serving process and looks only at paths, with fixed logic;
    ``analyse`` always runs inside the execution boundary (``isolation``), in a child process
    that received the analyzer pickled: an analyzer is plain data. ``tools`` names the external
    programs it runs, whose commands the serving process resolves (``AnalysisInput.tools``)."""

    @property
    def name(self) -> str: ...

    @property
    def tools(self) -> tuple[str, ...]: ...

    @property
    def rules(self) -> tuple[Rule, ...]: ...

    @property
    def differential(self) -> bool:
        """Whether its findings are judged against the base: the engine runs it on the base side
        of a file too, and a finding that stood there is not the pull request's
        (``core.differential``). False for checks that compare the sides themselves or whose
        finding is worth saying wherever it stands (a secret, a conflict marker)."""
        ...

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        """Paths whose head contents this analyzer needs (config files included)."""
        ...

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput: ...


def unreadable(item: FileUnderReview) -> str | None:
    """Why a tool cannot be given this file's head text at its path, or None."""
    if item.content is None:
        return "content not available at the head commit"
    if item.content.is_binary:
        return "the file is binary"
    if item.content.text is None:
        return "content too large to read"
    if safe_relative(item.path) is None:
        return "unusual path"
    return None


def safe_relative(path: str) -> PurePosixPath | None:
    """``path`` when it is a plain relative path (no ``..``, no absolute, no NUL or backslash)."""
    candidate = PurePosixPath(path)
    if (
        not path
        or "\0" in path
        or "\\" in path
        or candidate.is_absolute()
        or any(part in ("", ".", "..") for part in path.split("/"))
    ):
        return None
    return candidate


def fingerprint(rule: str, path: str, text: str) -> str:
    """Stable across line shifts: the rule, the path and the flagged text without surrounding
    whitespace (several lines: each stripped, joined with newlines)."""
    normalised = "\n".join(line.strip() for line in text.split("\n")).strip()
    return hashlib.sha1(f"{rule}\0{path}\0{normalised}".encode()).hexdigest()[:16]


def content_digest(rule: str, text: str) -> str:
    """The fingerprint without the path: the same finding in a file renamed since."""
    return fingerprint(rule, "", text)


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
    evidence: str = "",
    docs: str = "",
) -> Finding:
    """A ``Finding`` whose fingerprint is computed from ``text``, the flagged line(s);
    ``evidence``: what was flagged where the message does not say it (``Finding.evidence``);
    ``docs``: the rule's documentation (``Finding.docs``)."""
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
        content=content_digest(rule, text),
        evidence=evidence,
        docs=docs,
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
