"""Whitespace and file hygiene: nits summarised in the review body, never inline comments.

Whitespace errors follow ``git diff --check`` with git's default ``core.whitespace``
(``blank-at-eol``, ``space-before-tab``, ``blank-at-eof``) on added lines, one finding per file
and kind, ``line`` being the first offending line. One departure from git: in a file whose lines
all end with CRLF, the CR is taken as the line ending rather than as trailing whitespace (git
would flag every line of such a file); in a file that mixes endings, a CR is trailing whitespace,
as git says. Also: a changed last line without a newline, binary files added, large files.

Not reported: whitespace in files the repository does not lint (``lintconfig``); a missing final
newline on a symlink (git stores its target path, which has none) or on a minified, single-line
asset (an SVG, a line over ``MINIFIED_LINE`` characters), where tools write none on purpose.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.diff import PatchLines
from ..core.model import ChangedFile, Finding, Severity
from .base import AnalysisInput, AnalyzerOutput, FileUnderReview, Rule, finding

__all__ = [
    "LARGE_ADDITIONS",
    "HygieneAnalyzer",
    "blank_at_eof",
    "line_list",
    "space_before_tab",
    "trailing_whitespace",
]

LARGE_ADDITIONS = 5000
MINIFIED_LINE = 500
NO_FINAL_NEWLINE_SUFFIXES = (".svg", ".min.js", ".min.css", ".map")
MAX_LISTED_LINES = 10


def line_list(numbers: Sequence[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:MAX_LISTED_LINES])
    more = len(numbers) - MAX_LISTED_LINES
    word = "line" if len(numbers) == 1 else "lines"
    return f"{word} {shown}" + (f" and {more} more" if more > 0 else "")


def _consistently_crlf(lines: PatchLines) -> bool:
    ending = lines.right_lines - ({lines.eof_line} if lines.eof_line is not None else set())
    return bool(ending) and ending <= lines.crlf_lines


def trailing_whitespace(lines: PatchLines) -> list[int]:
    cr_is_whitespace = not _consistently_crlf(lines)
    return [
        number
        for number, text in sorted(lines.added_text.items())
        if text.endswith((" ", "\t")) or (cr_is_whitespace and number in lines.crlf_lines)
    ]


def space_before_tab(lines: PatchLines) -> list[int]:
    return [
        number
        for number, text in sorted(lines.added_text.items())
        if " \t" in text[: len(text) - len(text.lstrip(" \t"))]
    ]


def blank_at_eof(lines: PatchLines, line_count: int | None = None) -> list[int]:
    """Blank lines added at the very end of the file. The patch shows context after a change
    unless the change reaches the end of the file, so added lines ending the last hunk are at
    the end; ``line_count`` (from the content, when read) confirms it."""
    blank: list[int] = []
    for number in reversed(lines.tail_added):
        if lines.added_text.get(number, "x").strip():
            break
        blank.append(number)
    blank.reverse()
    if blank and line_count is not None and blank[-1] != line_count:
        return []
    return blank


def _line_count(item: FileUnderReview) -> int | None:
    text = item.text
    if text is None:
        return None
    return len(text.splitlines())


def _minified(path: str, lines: PatchLines) -> bool:
    last = lines.added_text.get(lines.eof_line, "") if lines.eof_line is not None else ""
    return path.lower().endswith(NO_FINAL_NEWLINE_SUFFIXES) or len(last) > MINIFIED_LINE


class HygieneAnalyzer:
    name = "hygiene"
    tools: tuple[str, ...] = ()
    differential: bool = False
    rules: tuple[Rule, ...] = (
        Rule("hygiene/binary-file", Severity.NIT, "a binary file added", file_level=True),
        Rule("hygiene/large-file", Severity.NIT, "a very large file or change", file_level=True),
        Rule("hygiene/trailing-whitespace", Severity.NIT, "trailing whitespace on added lines"),
        Rule("hygiene/space-before-tab", Severity.NIT, "a space before a tab in an added line's indent"),
        Rule("hygiene/blank-at-eof", Severity.NIT, "blank lines added at the end of a file"),
        Rule("hygiene/no-newline-at-eof", Severity.NIT, "a file left without a newline at its end"),
    )

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        # Without a patch, an added file with no counted lines is binary, or empty: only its
        # content (GitHub reports isBinary and the size without sending a binary's bytes) tells.
        return [f.path for f in unpatched if f.status == "added" and not f.additions and not f.deletions]

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        out = AnalyzerOutput()
        limit = batch.settings.max_file_bytes
        symlinks = batch.tree.symlinks if batch.tree is not None else frozenset()
        for item in batch.files:
            if batch.linted(item) and item.path not in symlinks:
                out.findings.extend(self._whitespace(item))
            out.findings.extend(self._large(item, limit))
        for item in batch.unpatched:
            content = item.content
            if item.file.status == "added" and content is not None and content.is_binary:
                out.findings.append(
                    self._nit(item, 1, "hygiene/binary-file", f"binary file added ({content.size:,} bytes)")
                )
            out.findings.extend(self._large(item, limit))
        return out

    @staticmethod
    def _nit(item: FileUnderReview, line: int, rule: str, message: str, text: str = "") -> Finding:
        return finding(item.path, line, Severity.NIT, rule, message, text, inline=False)

    def _whitespace(self, item: FileUnderReview) -> list[Finding]:
        lines = item.lines
        found: list[Finding] = []
        checks = (
            ("hygiene/trailing-whitespace", "trailing whitespace", trailing_whitespace(lines)),
            ("hygiene/space-before-tab", "space before tab in indent", space_before_tab(lines)),
            (
                "hygiene/blank-at-eof",
                "blank line added at end of file",
                blank_at_eof(lines, _line_count(item)),
            ),
        )
        for rule, what, numbers in checks:
            if numbers:
                text = "\n".join(lines.added_text[n] for n in numbers)
                found.append(self._nit(item, numbers[0], rule, f"{what} on {line_list(numbers)}", text))
        if lines.eof_line is not None and lines.eof_line in lines.added and not _minified(item.path, lines):
            found.append(
                self._nit(
                    item,
                    lines.eof_line,
                    "hygiene/no-newline-at-eof",
                    "no newline at end of file",
                    lines.added_text.get(lines.eof_line, ""),
                )
            )
        return found

    def _large(self, item: FileUnderReview, limit: int) -> list[Finding]:
        content = item.content
        if content is not None and content.size > limit:
            message = f"large file: {content.size:,} bytes (limit {limit:,})"
        elif item.file.additions > LARGE_ADDITIONS:
            message = f"large change: {item.file.additions:,} lines added"
        else:
            return []
        return [self._nit(item, 1, "hygiene/large-file", message)]
