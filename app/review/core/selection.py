"""Which changed files the built-in reviewer analyses, and why the others are skipped. Pure.

Glob patterns follow ``.gitignore`` conventions, which is what people write in
``review.paths_ignore``: ``*`` and ``?`` stay within one path segment, ``**`` spans any number of
directories (``docs/**``, ``**/fixtures/*.json``), a pattern with no ``/`` except a trailing one
matches at any depth (``*.lock``, ``build/``), and a pattern that matches a directory matches
everything below it (``docs/*`` covers ``docs/a/b.md``). A leading ``/`` anchors at the root.
``review.paths_ignore`` also accepts a plain ``fnmatch`` reading (see ``matching_pattern``).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .codespan import code_span
from .model import ChangedFile, SkipCause, Skipped

__all__ = [
    "DEFAULT_EXCLUDES",
    "PATCH_OMITTED",
    "Selection",
    "glob_match",
    "inside_tree",
    "looks_generated",
    "matching_pattern",
    "select_files",
]

PATCH_OMITTED = "patch omitted by GitHub (binary or too large)"

# (pattern, what kind of file it is): skipped unless the repository's config says otherwise.
DEFAULT_EXCLUDES: tuple[tuple[str, str], ...] = (
    ("*.lock", "lock file"),
    ("package-lock.json", "lock file"),
    ("npm-shrinkwrap.json", "lock file"),
    ("yarn.lock", "lock file"),
    ("pnpm-lock.yaml", "lock file"),
    ("poetry.lock", "lock file"),
    ("Pipfile.lock", "lock file"),
    ("Cargo.lock", "lock file"),
    ("Gemfile.lock", "lock file"),
    ("composer.lock", "lock file"),
    ("go.sum", "lock file"),
    ("vendor/", "vendored"),
    ("node_modules/", "vendored"),
    ("third_party/", "vendored"),
    ("dist/", "generated"),
    ("*.min.js", "generated"),
    ("*.min.css", "generated"),
    ("*_pb2.py", "generated"),
    ("*_pb2.pyi", "generated"),
    ("*_pb2_grpc.py", "generated"),
    ("*.pb.go", "generated"),
    ("*.generated.*", "generated"),
)

_GENERATED_HEADER = re.compile(r"(?i)\bgenerated\b.*\b(?:do\s+not|don'?t)\s+(?:edit|modify)\b")
_AT_GENERATED = re.compile(r"@generated\b")
GENERATED_HEADER_LINES = 5

REMOVED = "file removed"


@functools.lru_cache(maxsize=512)
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(glob_regex(pattern))


def glob_regex(pattern: str) -> str:
    """The regular expression (``fullmatch``) for a gitignore-style glob."""
    anchored = pattern.startswith("/")
    pattern = pattern.strip("/") if anchored else pattern.rstrip("/")
    if not anchored and "/" not in pattern:
        pattern = "**/" + pattern
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(char))
                i += 1
                continue
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


def glob_match(pattern: str, path: str) -> bool:
    """Whether ``path`` (repository-relative, ``/``-separated) or one of its directories matches."""
    pattern = pattern.strip()
    if not pattern or pattern.startswith("#"):
        return False
    regex = _compile(pattern)
    parts = path.strip("/").split("/")
    return any(regex.fullmatch("/".join(parts[:i])) for i in range(len(parts), 0, -1))


def matching_pattern(patterns: Sequence[str], path: str) -> str | None:
    """The first of ``review.paths_ignore`` that matches: as described above, or as a plain
    ``fnmatch`` pattern over the whole path (where ``*`` also crosses ``/``, so ``src/*.py``
    covers ``src/pkg/a.py`` too) — whichever reading the author had in mind."""
    return next(
        (p for p in patterns if p.strip() and (glob_match(p, path) or fnmatch.fnmatchcase(path, p.strip()))),
        None,
    )


def inside_tree(directory: str, value: str) -> str | None:
    """The repository path ``value`` names from ``directory``, when it stays inside the tree."""
    text = value.strip()
    if not text or text.startswith(("/", "~")) or "\0" in text or "\\" in text or "$" in text:
        return None
    parts: list[str] = [p for p in directory.split("/") if p]
    for part in text.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts)


def looks_generated(text: str) -> bool:
    """A "generated ... do not edit" (or ``@generated``) header within the first five lines."""
    head = text.splitlines()[:GENERATED_HEADER_LINES]
    return any(_GENERATED_HEADER.search(line) or _AT_GENERATED.search(line) for line in head)


@dataclass(frozen=True, slots=True)
class Selection:
    analysable: tuple[ChangedFile, ...]  # line-level analysis: has a patch, within max_files
    unpatched: tuple[ChangedFile, ...]  # not ignored, but GitHub gave no patch (hygiene only)
    skipped: tuple[Skipped, ...]


def select_files(
    files: Sequence[ChangedFile], *, paths_ignore: Sequence[str] = (), max_files: int = 300
) -> Selection:
    """Apply, in this order: removed files, ``review.paths_ignore``, the default exclusions
    (lock files, vendored and generated code), files without a patch, then ``max_files`` over
    what is left, in the given order."""
    analysable: list[ChangedFile] = []
    unpatched: list[ChangedFile] = []
    skipped: list[Skipped] = []
    for file in files:
        if file.status == "removed":
            skipped.append(Skipped(file.path, REMOVED, SkipCause.NOTHING))
            continue
        pattern = matching_pattern(paths_ignore, file.path)
        if pattern is not None:
            reason = f"ignored by review.paths_ignore ({code_span(pattern)})"
            skipped.append(Skipped(file.path, reason, SkipCause.REPOSITORY))
            continue
        default = next(((p, kind) for p, kind in DEFAULT_EXCLUDES if glob_match(p, file.path)), None)
        if default is not None:
            skipped.append(Skipped(file.path, f"{default[1]} (`{default[0]}`)"))
            continue
        if file.patch is None or (file.status == "renamed" and not file.additions and not file.deletions):
            if file.status == "renamed" and not file.additions and not file.deletions:
                skipped.append(Skipped(file.path, "renamed without changes", SkipCause.NOTHING))
            else:
                skipped.append(Skipped(file.path, PATCH_OMITTED))
                unpatched.append(file)
            continue
        if len(analysable) >= max_files:
            skipped.append(Skipped(file.path, f"over the limit of {max_files} files (review.max_files)"))
            continue
        analysable.append(file)
    return Selection(tuple(analysable), tuple(unpatched), tuple(skipped))
