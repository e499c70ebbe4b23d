"""What one review reads before anything is evaluated, and the bounds on it: the lint
configuration files to read at the base, the contents a review keeps (``within_bytes``), the
base side of each changed file, and what the findings depend on besides the files
(``rules_digest``). Runs in the serving process, on paths, sizes and patches only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from ..analyzers import Analyzer, is_python
from ..core.diff import base_of
from ..core.lintconfig import config_paths
from ..core.model import ChangedFile, ContentReader, FileContent, RepoTree, ReviewSettings

__all__ = [
    "MAX_CONFIG_CANDIDATES",
    "MAX_CONFIG_DEPTH",
    "base_config_paths",
    "base_sides",
    "capped_configs",
    "rules_digest",
    "size_label",
    "within_bytes",
]

MAX_CONFIG_CANDIDATES = 400  # lint configuration files one review reads at the base
MAX_CONFIG_DEPTH = 12  # directories: a configuration deeper than this is not looked for


def rules_digest(
    analyzers: Sequence[Analyzer],
    configs: Mapping[str, FileContent | None],
    tools: Mapping[str, tuple[str, ...]],
    settings: ReviewSettings,
) -> str:
    """What a file's findings depend on besides its text and path: the analyzers, the base's
    lint configuration, the programs run and the review's settings (``bounded.base_key``)."""
    parts = [
        repr([(type(a).__qualname__, a.name) for a in analyzers]),
        repr(sorted((path, c.text if c is not None else None) for path, c in configs.items())),
        repr(sorted(tools.items())),
        repr(settings),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


async def base_sides(
    analysable: Sequence[ChangedFile],
    contents: Mapping[str, FileContent | None],
    read_base: ContentReader | None,
) -> dict[str, FileContent | None]:
    """The base side of the changed files the base had (the differential findings, and the API
    check, compare with it): rebuilt from the head and the patch, so at the merge base, as the
    diff is, at no cost in calls; read from the base where that fails for a Python file only
    (the API check needs it; elsewhere a finding without a base side is judged as new)."""
    base: dict[str, FileContent | None] = {}
    unbuilt: list[str] = []
    for f in analysable:
        if f.status not in ("modified", "renamed"):
            continue
        head = contents.get(f.path)
        text = base_of(head.text, f.patch) if head is not None and head.text is not None else None
        if text is None and is_python(f.path):
            unbuilt.append(f.previous_path or f.path)
        elif text is None:
            continue
        else:
            base[f.previous_path or f.path] = FileContent(text=text, size=len(text.encode()))
    if read_base is not None and unbuilt:
        base.update(await read_base(unbuilt))
    return base


def base_config_paths(
    selected: Sequence[str], tree: RepoTree | None, changed: Sequence[ChangedFile]
) -> list[str]:
    """The lint configuration files to read at the base: those on the analysed paths that the
    head's tree holds, and those the pull request changed, removed or renamed (the base may have
    them where the head does not)."""
    candidates = set(config_paths(selected, None))
    touched = {p for f in changed for p in (f.path, f.previous_path) if p is not None and p in candidates}
    return list(dict.fromkeys([*config_paths(selected, tree), *sorted(touched)]))


def size_label(count: int) -> str:
    return (
        f"{count // 2**20} MB"
        if count >= 2**20
        else f"{count // 1024} KB"
        if count >= 1024
        else f"{count} bytes"
    )


def within_bytes(
    contents: Mapping[str, FileContent | None], limit: int
) -> tuple[dict[str, FileContent | None], frozenset[str]]:
    """The contents, in their order, while their sizes add up to at most ``limit``; and the
    paths left out past it (what a review reads and pickles for its children is bounded)."""
    kept: dict[str, FileContent | None] = {}
    over: set[str] = set()
    total = 0
    for path, content in contents.items():
        size = content.size if content is not None else 0
        if total + size > limit:
            over.add(path)
            continue
        total += size
        kept[path] = content
    return kept, frozenset(over)


def capped_configs(paths: Sequence[str]) -> tuple[list[str], str | None]:
    """At most ``MAX_CONFIG_CANDIDATES`` lint configuration files to read, none deeper than
    ``MAX_CONFIG_DEPTH`` directories, the shallowest first (where a repository keeps its
    configuration); and the note when some were left out. Without a complete listing of the
    repository every candidate on every path is asked for: 300 files 60 directories deep would
    be 72,005 reads."""
    fitting = sorted((p for p in paths if p.count("/") <= MAX_CONFIG_DEPTH), key=lambda p: (p.count("/"), p))
    kept = set(fitting[:MAX_CONFIG_CANDIDATES])
    if len(kept) == len(paths):
        return list(paths), None
    left = len(paths) - len(kept)
    return [p for p in paths if p in kept], (
        f"{left} lint configuration candidates not read (at most {MAX_CONFIG_CANDIDATES}, "
        f"{MAX_CONFIG_DEPTH} directories deep at most: the shallowest were read)"
    )
