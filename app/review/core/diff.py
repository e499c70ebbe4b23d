"""Line mapping for one file's patch, as GitHub's pull-request file list gives it. Pure.

GitHub's ``patch`` is git's unified diff without the ``diff --git``/``---``/``+++`` header: hunks
starting with ``@@ -a,b +c,d @@ optional section``, three lines of context. An inline review
comment with ``side: RIGHT`` is accepted only on a RIGHT-side line inside a hunk (an added or a
context line); everything else must go to the review body.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["PatchLines", "added_text", "base_of", "blob_id", "is_anchorable", "parse_patch", "whole_file"]

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True, slots=True)
class PatchLines:
    """What one file's patch says about the RIGHT (head) side."""

    right_lines: frozenset[int] = frozenset()  # every RIGHT line inside a hunk: added and context
    added: frozenset[int] = frozenset()  # RIGHT lines the PR added or changed
    added_text: dict[int, str] = field(default_factory=dict)  # head line -> text, without "\r\n"
    no_newline_at_end: bool = False  # the new side's last line has "\ No newline at end of file"
    eof_line: int | None = None  # that last line's number, when no_newline_at_end
    hunks: tuple[tuple[int, int], ...] = ()  # RIGHT line ranges (first, last) of each hunk
    crlf_lines: frozenset[int] = frozenset()  # RIGHT lines in the patch that end with "\r"
    tail_added: tuple[int, ...] = ()  # the added lines ending the last hunk with no context after

    def hunk_of(self, line: int) -> int | None:
        """Index of the hunk whose RIGHT range holds ``line``."""
        for index, (first, last) in enumerate(self.hunks):
            if first <= line <= last:
                return index
        return None


def is_anchorable(lines: PatchLines, line: int, start_line: int | None = None) -> bool:
    """Whether GitHub accepts an inline comment (side RIGHT) on ``line`` — or on the range
    ``start_line..line``, which must lie inside one hunk. A finding that is not anchorable belongs
    in the review body."""
    if line not in lines.right_lines:
        return False
    if start_line is None or start_line == line:
        return True
    if start_line > line or start_line not in lines.right_lines:
        return False
    return lines.hunk_of(start_line) == lines.hunk_of(line)


def parse_patch(patch: str | None) -> PatchLines:
    """Map a patch's hunks to head line numbers. Tolerates the full ``git diff`` form (lines
    before the first hunk header are ignored), omitted hunk counts (``@@ -1 +1 @@``), "\\ No
    newline at end of file" on either side, an empty or missing patch, and CRLF: a file's own
    CRLF line endings show up as a trailing "\\r" on its lines (recorded in ``crlf_lines``,
    stripped from ``added_text``); a patch whose every line ends with CRLF (hunk headers
    included) is read as if it used LF."""
    if not patch:
        return PatchLines()
    raw_lines = _lines_of(patch)

    right: set[int] = set()
    added: set[int] = set()
    added_text: dict[int, str] = {}
    crlf: set[int] = set()
    hunks: list[tuple[int, int]] = []
    old_left = new_left = 0
    new_line = 0
    in_hunk = False
    last_kind = ""  # kind of the previous content line: " ", "+" or "-"
    last_new: int | None = None  # RIGHT number of the previous content line, if it had one
    eof_line: int | None = None
    tail: list[int] = []

    for raw in raw_lines:
        header = _HUNK.match(raw)
        if header:
            old_left = 1 if header.group(2) is None else int(header.group(2))
            new_left = 1 if header.group(4) is None else int(header.group(4))
            new_line = int(header.group(3))
            hunks.append((new_line, new_line + new_left - 1))
            in_hunk = True
            last_kind, last_new = "", None
            tail = []
            continue
        if not in_hunk:
            continue
        if raw.startswith("\\"):
            # "\ No newline at end of file" belongs to the line just before it.
            if last_kind in ("+", " ") and last_new is not None:
                eof_line = last_new
            continue
        if old_left <= 0 and new_left <= 0:
            in_hunk = False  # past the hunk: a following file's header, or the final newline
            continue
        kind, text = (raw[0], raw[1:]) if raw else (" ", "")
        if kind not in "+- ":
            in_hunk = False
            continue
        if kind == "-":
            old_left -= 1
            last_kind, last_new = kind, None
            continue
        number = new_line
        new_line += 1
        new_left -= 1
        right.add(number)
        if text.endswith("\r"):
            crlf.add(number)
            text = text[:-1]
        if kind == "+":
            added.add(number)
            added_text[number] = text
            tail.append(number)
        else:
            old_left -= 1
            tail = []
        last_kind, last_new = kind, number

    return PatchLines(
        right_lines=frozenset(right),
        added=frozenset(added),
        added_text=added_text,
        no_newline_at_end=eof_line is not None,
        eof_line=eof_line,
        hunks=tuple((first, last) for first, last in hunks if last >= first),
        crlf_lines=frozenset(crlf),
        tail_added=tuple(tail),
    )


def whole_file(rows: Sequence[str], *, newline_at_end: bool = True) -> PatchLines:
    """A file as if every line were added (a new file's patch): how the base side of a changed
    file is shown to the analyzers, which then report on all of it."""
    numbers = range(1, len(rows) + 1)
    last = len(rows) if rows and not newline_at_end else None
    return PatchLines(
        right_lines=frozenset(numbers),
        added=frozenset(numbers),
        added_text={n: rows[n - 1] for n in numbers},
        no_newline_at_end=last is not None,
        eof_line=last,
        hunks=((1, len(rows)),) if rows else (),
        tail_added=tuple(numbers),
    )


def _lines_of(patch: str) -> list[str]:
    """The patch's lines; one whose hunk headers all end with CRLF used CRLF throughout: as LF."""
    raw_lines = patch.split("\n")
    headers = [line for line in raw_lines if line.startswith("@@")]
    if headers and all(line.endswith("\r") for line in headers):
        raw_lines = [line[:-1] if line.endswith("\r") else line for line in raw_lines]
    return raw_lines


def base_of(head: str, patch: str | None) -> str | None:
    """The LEFT side of a patch, rebuilt from the head text: the file as it was at the merge base,
    which is what GitHub's pull-request diff is taken against (the base branch's tip may have
    moved on since). Linear in the two texts. None when the patch does not apply to ``head``
    (a context or added line differs), or there is no patch."""
    if not patch:
        return None
    lines = patch.split("\n")
    headers = [line for line in lines if line.startswith("@@")]
    if not headers:
        return None
    if all(line.endswith("\r") for line in headers):
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    theirs = head.splitlines(keepends=True)
    out: list[str] = []
    at = 0  # head lines copied or consumed so far
    old_left = new_left = 0
    last: str | None = None  # what the previous content line was: " ", "+" or "-"
    for raw in lines:
        header = _HUNK.match(raw)
        if header:
            start = int(header.group(3)) - (0 if header.group(4) == "0" else 1)
            if start < at or start > len(theirs):
                return None
            out.extend(theirs[at:start])  # what lies between hunks is the same on both sides
            at = start
            old_left = 1 if header.group(2) is None else int(header.group(2))
            new_left = 1 if header.group(4) is None else int(header.group(4))
            last = None
            continue
        if raw.startswith("\\"):  # "\ No newline at end of file": about the line before it
            if last in ("-", " ") and out and out[-1].endswith("\n"):
                out[-1] = out[-1][:-1]
            continue
        if old_left <= 0 and new_left <= 0:
            continue
        kind, text = (raw[0], raw[1:]) if raw else (" ", "")
        if kind == "-":
            out.append(text + "\n")
            old_left -= 1
        elif kind in "+ ":
            if at >= len(theirs) or theirs[at].rstrip("\n") != text:
                return None
            if kind == " ":
                out.append(theirs[at] if theirs[at].endswith("\n") else theirs[at] + "\n")
                old_left -= 1
            at += 1
            new_left -= 1
        else:
            return None
        last = kind
    out.extend(theirs[at:])
    return "".join(out)


def added_text(patch: str | None, blob_sha: str | None) -> str | None:
    """An added file's text, rebuilt from its patch (one hunk from ``-0,0``, every line added),
    when that text has the blob id GitHub listed for the file; None when it cannot be told for
    sure (no patch, a patch GitHub cut, another shape, a NUL: then the file is read). The id
    check makes the rebuilt text the file's exact bytes, so reading it would change nothing."""
    if not patch or not blob_sha or "\0" in patch:
        return None
    lines = patch.split("\n")
    header = _HUNK.match(lines[0])
    if header is None or header.group(1) != "0" or header.group(2) != "0":
        return None
    out: list[str] = []
    for raw in lines[1:]:
        if raw.startswith("+"):
            out.append(raw[1:] + "\n")
        elif raw.startswith("\\") and out:  # "\ No newline at end of file"
            out[-1] = out[-1][:-1]
        elif raw:
            return None
    text = "".join(out)
    return text if blob_id(text) == blob_sha else None


def blob_id(text: str) -> str:
    """The git blob id of a text, as ``git hash-object`` computes it (UTF-8)."""
    data = text.encode("utf-8")
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
