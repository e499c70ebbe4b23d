"""What git says about a change, read: the files and hunks of ``git diff`` output, the lines a
diff removed, a line mapped back through a file's hunks, and ``git blame --line-porcelain``.
Pure; ``history_mine`` runs git and uses these to find where a fixed line was written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Blamed", "changed_paths", "file_sections", "map_back", "parse_blame", "removed_lines"]

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def file_sections(diff: str) -> list[tuple[str | None, str | None, list[str]]]:
    """(old path, new path, hunk lines) per file of ``git diff`` output; None for /dev/null."""
    out: list[tuple[str | None, str | None, list[str]]] = []
    old: str | None = None
    new: str | None = None
    lines: list[str] = []
    in_header = False
    for line in diff.split("\n"):
        if line.startswith("diff --git "):
            if in_header or lines or old is not None or new is not None:
                out.append((old, new, lines))
            old = new = None
            lines = []
            in_header = True
            continue
        if in_header and line.startswith("--- "):
            old = None if line[4:] == "/dev/null" else line[6:]
            continue
        if in_header and line.startswith("+++ "):
            new = None if line[4:] == "/dev/null" else line[6:]
            continue
        if line.startswith("@@"):
            in_header = False
        if not in_header:
            lines.append(line)
    if in_header or lines or old is not None or new is not None:
        out.append((old, new, lines))
    return out


def removed_lines(diff: str) -> dict[str, tuple[int, ...]]:
    """Old path -> the old-side line numbers a ``git diff`` removed or changed (files the diff
    created have none)."""
    found: dict[str, tuple[int, ...]] = {}
    for old, _new, lines in file_sections(diff):
        if old is None:
            continue
        numbers: list[int] = []
        line_no = 0
        for line in lines:
            header = _HUNK.match(line)
            if header:
                line_no = int(header.group(1))
                continue
            if line.startswith("-"):
                numbers.append(line_no)
                line_no += 1
            elif line.startswith(" "):
                line_no += 1
        if numbers:
            found[old] = tuple(numbers)
    return found


def changed_paths(diff: str) -> set[str]:
    return {path for old, new, _ in file_sections(diff) for path in (old, new) if path is not None}


def map_back(hunks: Sequence[str], new_line: int) -> int | None:
    """The old-side line of ``new_line`` through one file's diff hunks (old -> new), or None when
    the diff added that line."""
    shift = 0  # new - old, past the hunks seen so far
    for line in hunks:
        header = _HUNK.match(line)
        if not header:
            continue
        old_start, old_count = int(header.group(1)), 1 if header.group(2) is None else int(header.group(2))
        new_start, new_count = int(header.group(3)), 1 if header.group(4) is None else int(header.group(4))
        # With -U0, a hunk of count 0 sits *after* its start line.
        first_new = new_start if new_count else new_start + 1
        if new_line < first_new:
            break
        if new_line < first_new + new_count:
            return None  # inside a hunk: -U0 hunks hold only changed lines
        after_old = old_start + (old_count or 1)  # the first line past the hunk, each side
        after_new = new_start + (new_count or 1)
        shift = after_new - after_old
    return new_line - shift


_BLAME_HEADER = re.compile(r"^[0-9a-f]{40} \d+ \d+")


@dataclass(frozen=True, slots=True)
class Blamed:
    sha: str
    path: str  # the path in ``sha``
    line: int  # the line in ``sha``
    final: int  # the line in the blamed revision
    time: int  # committer time
    boundary: bool


def parse_blame(text: str) -> list[Blamed]:
    """``git blame --line-porcelain`` output -> one entry per blamed line."""
    out: list[Blamed] = []
    sha = ""
    orig = final = 0
    fields: dict[str, str] = {}
    boundary = False
    for line in text.split("\n"):
        if line.startswith("\t"):
            out.append(
                Blamed(
                    sha,
                    fields.get("filename", ""),
                    orig,
                    final,
                    int(fields.get("committer-time", 0)),
                    boundary,
                )
            )
            fields, boundary = {}, False
            continue
        head = line.split(" ")
        if not fields and _BLAME_HEADER.match(line):
            sha, orig, final = head[0], int(head[1]), int(head[2])
            continue
        key, _, value = line.partition(" ")
        if key == "boundary":
            boundary = True
        elif key:
            fields[key] = value
    return out
