"""The merged pull requests of a local clone, read from its merge commits, and their trees.

A merge commit ``M`` on the first-parent line of the default branch is one merged pull request:
its pushes are the first-parent line of ``M^2`` down to what ``M^1`` already has, oldest first,
each with its committer time. A push's *base* is the newest commit of the base branch it
contains (``git merge-base M^1 push``): it moves when the author merged the base branch in or
rebased, which the replay plays as the base branch moving on and the branch force-pushed.
Trees come from ``git ls-tree`` and ``git cat-file --batch``, each blob read once per session.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..review.measure.local import GitError, git

__all__ = ["GitError", "GitTrees", "MergedPull", "Push", "merged_pulls"]

_GITHUB_MERGE = re.compile(r"Merge pull request #(?P<number>\d+) from (?P<branch>\S+)")
_TITLED_MERGE = re.compile(r"(?P<title>.*\S)\s+\(#(?P<number>\d+)\)")  # "Title (#123)", as click merges
FIELD = "\x1f"
BLOB_MODES = ("100644", "100755", "120000")  # files, executables, symlinks (as their target's text)


@dataclass(frozen=True, slots=True)
class Push:
    """One commit of the pull request's branch, as it was pushed."""

    sha: str
    base: str  # the base branch's newest commit this push contains
    at: float  # committer time, epoch seconds
    author: str
    subject: str


@dataclass(frozen=True, slots=True)
class MergedPull:
    merge_sha: str
    number: int | None  # from GitHub's "Merge pull request #N" subject; None for other merges
    title: str
    body: str
    merged_at: float
    pushes: tuple[Push, ...]

    @property
    def merge_base(self) -> str:
        """The base the pull request was merged against (its settings apply)."""
        return self.pushes[-1].base

    @property
    def author(self) -> str:
        return self.pushes[0].author


def _title_and_body(subject: str, body: str) -> tuple[int | None, str, str]:
    """GitHub's merge commit: "Merge pull request #N from ..." then the PR's title, then its body
    (or a subject "Title (#N)" and the body)."""
    titled = _TITLED_MERGE.fullmatch(subject)
    if titled is not None:
        return int(titled["number"]), titled["title"], body.strip()
    match = _GITHUB_MERGE.match(subject)
    if match is None:
        return None, subject, body.strip()
    title, _, rest = body.strip().partition("\n")
    return int(match["number"]), title.strip() or subject, rest.strip()


async def merged_pull(repo: Path, merge_sha: str) -> MergedPull | None:
    """The pull request merge commit ``merge_sha`` merged; None when it is not a two-parent merge
    or its second parent brought no commit of its own."""
    raw = (
        await git(repo, "show", "-s", f"--format=%H{FIELD}%P{FIELD}%ct{FIELD}%s{FIELD}%b", merge_sha)
    ).decode()
    sha, parents, merged_at, subject, body = raw.rstrip("\n").split(FIELD, 4)
    if len(parents.split()) != 2:
        return None
    first, second = parents.split()
    listing = (
        await git(
            repo,
            "log",
            "--first-parent",
            "--reverse",
            f"--format=%H{FIELD}%ct{FIELD}%an{FIELD}%s",
            second,
            f"^{first}",
        )
    ).decode()
    pushes = []
    for line in filter(None, listing.split("\n")):  # a subject may hold "\r" or "\x85"
        commit, at, author, commit_subject = line.split(FIELD, 3)
        try:
            base = (await git(repo, "merge-base", first, commit)).decode().strip()
        except GitError:  # git exits 1 for histories that never met (a subtree merged in): no PR
            return None
        pushes.append(Push(commit, base, float(at), author, commit_subject))
    if not pushes:
        return None
    number, title, description = _title_and_body(subject, body)
    return MergedPull(sha, number, title, description, float(merged_at), tuple(pushes))


async def merged_pulls(
    repo: Path, *, limit: int, min_commits: int = 1, tip: str = "HEAD"
) -> list[MergedPull]:
    """The newest ``limit`` merged pull requests of at least ``min_commits`` pushes on the
    first-parent line of ``tip``, oldest first (the order they were merged in)."""
    merges = (await git(repo, "log", "--merges", "--first-parent", "--format=%H", tip)).decode().split()
    found: list[MergedPull] = []
    for sha in merges:
        if len(found) >= limit:
            break
        pull = await merged_pull(repo, sha)
        if pull is not None and len(pull.pushes) >= min_commits:
            found.append(pull)
    return found[::-1]


async def resolve_commit(repo: Path, name: str) -> str:
    return (await git(repo, "rev-parse", "--verify", f"{name}^{{commit}}")).decode().strip()


class GitTrees:
    """Full trees of commits (path -> text), with every blob read once and shared between trees
    (unchanged files are one string in memory however many commits hold them). A blob that is
    not UTF-8 is decoded with replacement characters; its NUL bytes still say it is binary."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self._blobs: dict[str, str] = {}

    async def listing(self, sha: str) -> dict[str, str]:
        """path -> blob id at ``sha`` (submodules left out)."""
        out = (await git(self.repo, "ls-tree", "-r", "-z", "--full-tree", sha)).decode(
            errors="surrogateescape"
        )
        entries: dict[str, str] = {}
        for entry in out.split("\0"):
            if not entry:
                continue
            meta, _, path = entry.partition("\t")
            mode, kind, blob = meta.split()
            if kind == "blob" and mode in BLOB_MODES:
                entries[path] = blob
        return entries

    async def _read(self, blobs: Iterable[str]) -> None:
        missing = sorted({b for b in blobs if b not in self._blobs})
        if not missing:
            return
        out = await git(self.repo, "cat-file", "--batch", stdin="".join(f"{b}\n" for b in missing).encode())
        at = 0
        for blob in missing:
            header_end = out.index(b"\n", at)
            size = int(out[at:header_end].split()[2])
            start = header_end + 1
            self._blobs[blob] = out[start : start + size].decode("utf-8", errors="replace")
            at = start + size + 1

    async def tree(self, sha: str) -> dict[str, str]:
        listing = await self.listing(sha)
        await self._read(listing.values())
        return {path: self._blobs[blob] for path, blob in listing.items()}


def changes(old: Mapping[str, str], new: Mapping[str, str]) -> dict[str, str | None]:
    """What turns tree ``old`` into ``new``: changed or added files, None for removed ones."""
    out: dict[str, str | None] = {path: None for path in old if path not in new}
    out.update({path: text for path, text in new.items() if old.get(path) != text})
    return out
