"""A pull-request context from a local git repository, for ``python -m app review --git BASE..HEAD``.

The same engine then runs with no network at all: before installing the App, in pre-commit, or
in CI. Patches are taken from ``git diff`` exactly as GitHub shows them (the hunks, without the
``diff --git``/``---``/``+++`` header), file contents from ``git cat-file --batch`` at HEAD.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from ..core.model import ChangedFile, FileContent, PullContext, RepoTree, ReviewResult, ReviewSettings

STATUS = {"A": "added", "M": "modified", "D": "removed", "R": "renamed", "C": "copied", "T": "changed"}
_DIFF_HEADER = re.compile(r"^diff --git ", re.MULTILINE)
_BOT_LOGIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*\[bot\]")


class GitError(RuntimeError):
    pass


class RangeReview(Protocol):
    """Review ``base..tip`` of the clone at ``path`` as a pull request (titled ``title``): what
    was analysed, and the result. The measurements get the bot's own pipeline composed above the
    engine (``app.offline``), so a figure of theirs is a figure of the bot."""

    async def __call__(
        self, path: Path, *, base: str, tip: str, title: str | None = None
    ) -> tuple[PullContext, ReviewResult]: ...


# Nothing a repository's own configuration or attributes name is run by the command line's git:
# no textconv or external diff driver (they are commands), no fsmonitor hook, no git hook.
SAFE_GIT = ("-c", "core.quotepath=off", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")
_NO_DRIVERS = {
    "diff": ("--no-textconv", "--no-ext-diff"),
    "log": ("--no-textconv", "--no-ext-diff"),
    "show": ("--no-textconv", "--no-ext-diff"),
    "blame": ("--no-textconv",),
}


def git_argv(repo: Path, *args: str) -> list[str]:
    """The command line of ``git args`` in ``repo``, with ``SAFE_GIT`` and, for the commands that
    would run a driver, the options that turn drivers off."""
    command, rest = (args[0], args[1:]) if args else ("", ())
    return ["git", "-C", str(repo), *SAFE_GIT, command, *_NO_DRIVERS.get(command, ()), *rest]


async def git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    process = await asyncio.create_subprocess_exec(
        *git_argv(repo, *args),
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate(stdin)
    if process.returncode != 0:
        raise GitError(f"git {' '.join(args)}: {err.decode(errors='replace').strip()}")
    return out


def _hunks_of(section: str) -> tuple[str | None, bool]:
    """The hunks of one file's section of ``git diff`` output, and whether git called it binary."""
    lines = section.split("\n")
    for index, line in enumerate(lines):
        if line.startswith("@@"):
            return "\n".join(lines[index:]).rstrip("\n"), False
        if line.startswith("Binary files "):
            return None, True
    return "", False


async def context_from_git(
    repo: Path, base: str, head: str, *, settings: ReviewSettings | None = None
) -> PullContext:
    base_sha = (await git(repo, "rev-parse", "--verify", f"{base}^{{commit}}")).decode().strip()
    head_sha = (await git(repo, "rev-parse", "--verify", f"{head}^{{commit}}")).decode().strip()
    merge_base = (await git(repo, "merge-base", base_sha, head_sha)).decode().strip()
    statuses = (
        (await git(repo, "diff", "--name-status", "-z", "-M", merge_base, head_sha)).decode().split("\0")
    )
    entries: list[tuple[str, str, str | None]] = []
    index = 0
    while index < len(statuses) - 1:
        code = statuses[index]
        if code[:1] in ("R", "C"):
            entries.append((code[:1], statuses[index + 2], statuses[index + 1]))
            index += 3
        else:
            entries.append((code[:1], statuses[index + 1], None))
            index += 2
    diff = (await git(repo, "diff", "--no-color", "-M", "-U3", merge_base, head_sha)).decode(errors="replace")
    sections = [s for s in _DIFF_HEADER.split(diff) if s.strip()]
    files: list[ChangedFile] = []
    for (code, path, previous), section in zip(entries, sections, strict=False):
        patch, binary = _hunks_of(section)
        added = sum(1 for line in (patch or "").split("\n") if line.startswith("+"))
        removed = sum(1 for line in (patch or "").split("\n") if line.startswith("-"))
        files.append(
            ChangedFile(
                path=path,
                status=STATUS.get(code, "modified"),
                patch=None if binary else patch,
                additions=added,
                deletions=removed,
                previous_path=previous,
            )
        )

    async def read(paths: Sequence[str]) -> Mapping[str, FileContent | None]:
        return await read_at(repo, head_sha, paths)

    async def read_base(paths: Sequence[str]) -> Mapping[str, FileContent | None]:
        return await read_at(repo, merge_base, paths)

    async def tree() -> RepoTree:
        return await tree_at(repo, head_sha)

    author = (await git(repo, "log", "-1", "--format=%an", head_sha)).decode(errors="replace").strip()
    return PullContext(
        repo=str(repo),
        pr_number=None,
        title=f"{base}..{head}",
        # A git author name is no GitHub login, but an App's commits carry its login as the name
        # (``dependabot[bot]``): the only author the local mode can name, as GitHub would.
        author_login=author if _BOT_LOGIN.fullmatch(author) else None,
        base_sha=base_sha,
        head_sha=head_sha,
        files=tuple(files),
        read=read,
        settings=settings or ReviewSettings(),
        tree=tree,
        read_base=read_base,
    )


async def read_at(repo: Path, commit: str, paths: Sequence[str]) -> dict[str, FileContent | None]:
    """Contents of several paths at ``commit`` through one ``git cat-file --batch`` process."""
    unique = list(dict.fromkeys(paths))
    if not unique:
        return {}
    request = "".join(f"{commit}:{path}\n" for path in unique).encode()
    out = await git(repo, "cat-file", "--batch", stdin=request)
    found: dict[str, FileContent | None] = {}
    position = 0
    for path in unique:
        end = out.index(b"\n", position)
        header = out[position:end].decode(errors="replace")
        position = end + 1
        if header.endswith(" missing") or header.endswith(" ambiguous"):
            found[path] = None
            continue
        _, kind, size_text = header.rsplit(" ", 2)
        size = int(size_text)
        data = out[position : position + size]
        position += size + 1
        if kind != "blob":
            found[path] = None
            continue
        binary = b"\0" in data[:8000]
        found[path] = FileContent(
            text=None if binary else data.decode(errors="replace"), size=size, is_binary=binary
        )
    return found


async def tree_at(repo: Path, commit: str) -> RepoTree:
    """Every path at ``commit`` (``git ls-tree -r``): the layout a checkout would have."""
    out = await git(repo, "ls-tree", "-r", "-z", "--full-tree", commit)
    files: list[str] = []
    symlinks: list[str] = []
    for entry in out.decode(errors="replace").split("\0"):
        meta, _, path = entry.partition("\t")
        mode, _, kind = meta.partition(" ")
        if kind.startswith("blob"):
            (symlinks if mode == "120000" else files).append(path)
    return RepoTree.of(files, symlinks)
