"""Unified diffs between two file snapshots, shaped like GitHub's pull-request file list.

GitHub's ``patch`` is git's unified diff without the ``diff --git``/``---``/``+++`` header, three
lines of context, hunks starting with ``@@ -a,b +c,d @@``. Review comments may only sit on lines
inside those hunks; ``FileDiff.locate`` answers "is this line commentable, and where" for the
review endpoint, including GitHub's ``position`` (lines below the first hunk header, each later
hunk header counting as a line) and the ``diff_hunk`` shown with a comment.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from .state import blob_sha

CONTEXT_LINES = 3
MAX_PATCH_LINES = 3000  # a file whose patch is longer gets no patch (GitHub omits huge diffs)
MAX_FILES = 3000  # GitHub lists at most this many files for a pull request
NO_NEWLINE = "\\ No newline at end of file"


@dataclass
class DiffLine:
    kind: str  # " ", "+", "-", or "\\"
    text: str
    old: int | None  # line number on the LEFT side
    new: int | None  # line number on the RIGHT side


@dataclass
class Hunk:
    header: str
    lines: list[DiffLine] = field(default_factory=list)


@dataclass
class Located:
    hunk_index: int
    position: int
    diff_hunk: str


@dataclass
class FileDiff:
    filename: str
    status: str  # added | removed | modified | renamed
    additions: int
    deletions: int
    sha: str | None
    patch: str | None
    hunks: list[Hunk]
    previous_filename: str | None = None

    @property
    def changes(self) -> int:
        return self.additions + self.deletions

    def locate(self, side: str, line: int) -> Located | None:
        """Where ``line`` on ``side`` (RIGHT = new file, LEFT = old file) sits in the patch."""
        position = 0
        for index, hunk in enumerate(self.hunks):
            if index:
                position += 1  # a later hunk header counts as a line
            shown = [hunk.header]
            for diff_line in hunk.lines:
                position += 1
                shown.append(diff_line.kind + diff_line.text)
                number = diff_line.new if side == "RIGHT" else diff_line.old
                if number == line and diff_line.kind != "\\":
                    return Located(index, position, "\n".join(shown))
        return None

    def line_at(self, position: int) -> tuple[str, int] | None:
        """The (side, line) a deprecated ``position`` points at."""
        current = 0
        for index, hunk in enumerate(self.hunks):
            if index:
                current += 1
            for diff_line in hunk.lines:
                current += 1
                if current == position:
                    if diff_line.new is not None:
                        return "RIGHT", diff_line.new
                    if diff_line.old is not None:
                        return "LEFT", diff_line.old
                    return None
        return None


def _split(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _range(start: int, length: int) -> str:
    """difflib's/git's hunk range: ``3`` for one line, ``2,0`` for none, ``3,4`` otherwise."""
    begin = start + 1
    if length == 1:
        return f"{begin}"
    if length == 0:
        begin -= 1
    return f"{begin},{length}"


def _emit(lines: list[DiffLine], kind: str, raw: str, old: int | None, new: int | None) -> None:
    lines.append(DiffLine(kind, raw[:-1] if raw.endswith("\n") else raw, old, new))
    if not raw.endswith("\n"):
        lines.append(DiffLine("\\", NO_NEWLINE[1:], None, None))


def hunks_between(old_text: str, new_text: str) -> list[Hunk]:
    old, new = _split(old_text), _split(new_text)
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    hunks: list[Hunk] = []
    for group in matcher.get_grouped_opcodes(CONTEXT_LINES):
        first, last = group[0], group[-1]
        header = f"@@ -{_range(first[1], last[2] - first[1])} +{_range(first[3], last[4] - first[3])} @@"
        hunk = Hunk(header)
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for offset, raw in enumerate(old[i1:i2]):
                    _emit(hunk.lines, " ", raw, i1 + offset + 1, j1 + offset + 1)
                continue
            if tag in ("replace", "delete"):
                for offset, raw in enumerate(old[i1:i2]):
                    _emit(hunk.lines, "-", raw, i1 + offset + 1, None)
            if tag in ("replace", "insert"):
                for offset, raw in enumerate(new[j1:j2]):
                    _emit(hunk.lines, "+", raw, None, j1 + offset + 1)
        hunks.append(hunk)
    return hunks


def _render(hunks: list[Hunk]) -> str:
    out: list[str] = []
    for hunk in hunks:
        out.append(hunk.header)
        out.extend(line.kind + line.text for line in hunk.lines)
    return "\n".join(out)


def is_binary(text: str) -> bool:
    return "\0" in text


def file_diff(path: str, old_text: str | None, new_text: str | None) -> FileDiff:
    status = "added" if old_text is None else "removed" if new_text is None else "modified"
    old, new = old_text or "", new_text or ""
    sha = blob_sha(new_text if new_text is not None else old)
    if is_binary(old) or is_binary(new):
        return FileDiff(path, status, 0, 0, sha, None, [])
    hunks = hunks_between(old, new)
    additions = sum(1 for h in hunks for line in h.lines if line.kind == "+")
    deletions = sum(1 for h in hunks for line in h.lines if line.kind == "-")
    patch_lines = sum(1 + len(h.lines) for h in hunks)
    if patch_lines > MAX_PATCH_LINES:
        return FileDiff(path, status, additions, deletions, sha, None, [])
    return FileDiff(path, status, additions, deletions, sha, _render(hunks) if hunks else None, hunks)


RENAME_SIMILARITY = 0.5  # git's default (``-M50%``)
MAX_RENAME_CANDIDATES = 100  # on either side; beyond it, like git past its rename limit, none


def similar_renames(removed: dict[str, str], added: dict[str, str]) -> dict[str, str]:
    """New path -> old path for added files at least half like a removed one (by lines, best
    pairs first), as git pairs them."""
    if len(removed) > MAX_RENAME_CANDIDATES or len(added) > MAX_RENAME_CANDIDATES:
        return {}
    scored = []
    for new_path, new_text in added.items():
        for old_path, old_text in removed.items():
            if is_binary(old_text) or is_binary(new_text):
                continue
            matcher = difflib.SequenceMatcher(None, _split(old_text), _split(new_text), autojunk=False)
            if matcher.real_quick_ratio() >= RENAME_SIMILARITY and matcher.quick_ratio() >= RENAME_SIMILARITY:
                score = matcher.ratio()
                if score >= RENAME_SIMILARITY:
                    scored.append((-score, new_path, old_path))
    pairs: dict[str, str] = {}
    for _, new_path, old_path in sorted(scored):
        if new_path not in pairs and old_path not in pairs.values():
            pairs[new_path] = old_path
    return pairs


def diff_trees(old: dict[str, str], new: dict[str, str]) -> list[FileDiff]:
    """Every changed path between two full snapshots, in git's path order.

    A removed file whose content reappears under a new name is reported once, as ``renamed``
    with ``previous_filename``, like git's rename detection: with no patch when the content is
    the same, with the patch between the two when at least half of it is
    (``similar_renames``).
    """
    removed = {p: old[p] for p in old if p not in new}
    added = {p: new[p] for p in new if p not in old}
    renames: dict[str, str] = {}  # new path -> old path
    by_content: dict[str, list[str]] = {}
    for path in sorted(removed):
        by_content.setdefault(removed[path], []).append(path)
    for path in sorted(added):
        candidates = by_content.get(added[path])
        if candidates:
            renames[path] = candidates.pop(0)
    renames.update(
        similar_renames(
            {p: t for p, t in removed.items() if p not in renames.values()},
            {p: t for p, t in added.items() if p not in renames},
        )
    )
    renamed_from = set(renames.values())
    out: list[FileDiff] = []
    for path in sorted(set(old) | set(new)):
        if path in renamed_from:
            continue
        if path in renames:
            source = old[renames[path]]
            if source == new[path]:
                entry = FileDiff(path, "renamed", 0, 0, blob_sha(new[path]), None, [])
            else:
                entry = file_diff(path, source, new[path])
                entry.status = "renamed"
            entry.previous_filename = renames[path]
            out.append(entry)
            continue
        before, after = old.get(path), new.get(path)
        if before == after:
            continue
        out.append(file_diff(path, before, after))
    return out[:MAX_FILES]
