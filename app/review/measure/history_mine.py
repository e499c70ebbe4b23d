"""Regression pairs from a repository's own history, SZZ-style, for ``python -m app eval --history``.

A *fix* is found by its message (a revert, "regression", "broke", "introduced in #N", "follow-up",
a reference to a pull request whose merge commit is known). The lines it changed, ignoring
whitespace, are blamed at its parent (``git blame -w -M -C``: whitespace, moves and copies
followed back to the commit that wrote them); the *introducing* commit is the one the message names
(a reverted sha, a referenced pull request) when it exists, else the most recent blamed commit
within the window. The pair's *targets* are the fixed lines in the introducing commit's own
coordinates: blame says where each line blamed to it sat there; any other fixed line is mapped
back through the diff between the introducing commit and the fix's parent. Only pairs where both
commits touch Python are kept; every dropped candidate is counted with its reason.
Nothing here runs the repository's code: it only reads git.
"""

from __future__ import annotations

import bisect
import enum
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..analyzers import is_python, is_test_path
from .blame import Blamed, changed_paths, file_sections, map_back, parse_blame, removed_lines
from .local import GitError, git, read_at

__all__ = [
    "Candidate",
    "Commit",
    "Drop",
    "Mined",
    "Pair",
    "Signal",
    "Target",
    "classify",
    "mine",
    "own_pull_number",
    "pairs_from_file",
]

DAY = 86_400
BLAME_CONTEXT = 6  # lines blamed on each side of a fixed line


class Signal(enum.StrEnum):
    """Why a commit was taken for a fix (the first that applies, in this order)."""

    REVERT = "revert"
    INTRODUCED = "introduced-in"
    REGRESSION = "regression"
    BROKE = "broke"
    FOLLOW_UP = "follow-up"
    PULL_REFERENCE = "pull-reference"
    LISTED = "listed"  # given in a ``--pairs`` file


class Drop(enum.StrEnum):
    """Why a candidate fix gave no pair."""

    MERGE = "the fix is a merge commit"
    NO_PYTHON = "the fix changes no Python file"
    TESTS_ONLY = "the fix changes only tests"
    WHITESPACE = "the fix changes only whitespace"
    ONLY_ADDS = "the fix only adds lines (nothing to blame)"
    ROOT = "the introducing commit is the root commit"
    OUTSIDE_WINDOW = "every blamed commit is older than the window"
    INTRO_NO_PYTHON = "the introducing commit touches no Python"
    UNKNOWN_COMMIT = "a listed commit is not in the repository"
    GIT_ERROR = "git could not answer"
    LIMIT = "not examined: the pair limit was reached"


@dataclass(frozen=True, slots=True)
class Commit:
    sha: str
    parents: tuple[str, ...]
    time: int  # committer time, seconds since the epoch
    message: str

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]


@dataclass(frozen=True, slots=True)
class Candidate:
    fix: Commit
    signal: Signal
    named: str | None  # the introducing commit the message names, when it names a known one


@dataclass(frozen=True, slots=True, order=True)
class Target:
    """A fixed line, where it was in the introducing commit (head side, 1-based)."""

    path: str
    line: int


@dataclass(frozen=True, slots=True)
class Pair:
    intro: str
    fix: str
    signal: Signal
    subject: str  # the fix's subject
    targets: tuple[Target, ...]
    fixed_lines: int  # lines the fix changed in Python files (at its parent)


@dataclass(slots=True)
class Mined:
    pairs: list[Pair] = field(default_factory=list)
    candidates: int = 0
    dropped: Counter[Drop] = field(default_factory=Counter)


# --- messages (pure) ------------------------------------------------------------------------------

_REVERTED_SHA = re.compile(r"\bThis reverts commit ([0-9a-f]{7,40})\b", re.IGNORECASE)
_REVERT = re.compile(r"^Revert\b|\brevert(?:s|ed|ing)?\b", re.IGNORECASE | re.MULTILINE)
_INTRODUCED = re.compile(
    r"\b(?:introduced|caused|regressed)\s+(?:in|by)\s+(?:(?:PR|pull request)\s*)?(#\d+|[0-9a-f]{7,40})\b",
    re.IGNORECASE,
)
_REGRESSION = re.compile(r"\bregress(?:ion|ions|ed)?\b", re.IGNORECASE)
_BROKE = re.compile(r"\bbr(?:oke|oken)\b", re.IGNORECASE)
_FOLLOW_UP = re.compile(r"\bfollow[- ]?ups?\b", re.IGNORECASE)
_FOLLOW_UP_TO = re.compile(
    r"\bfollow[- ]?up\s+(?:to|of|for|on)\s+(?:(?:PR|pull request)\s*)?(#\d+|[0-9a-f]{7,40})\b", re.IGNORECASE
)
_FIXISH = re.compile(
    r"\b(?:fix\w*|bug\w*|revert\w*|regress\w*|broke\w*|follow[- ]?up|introduced)\b", re.IGNORECASE
)
_PULL_REF = re.compile(r"(?<![\w/])#(\d+)\b")
_OWN_SQUASH = re.compile(r"\(#(\d+)\)\s*$")
_OWN_MERGE = re.compile(r"^Merge pull request #(\d+)\b")


def own_pull_number(subject: str) -> int | None:
    """The pull request a commit itself landed (``Merge pull request #N`` or a squash's ``(#N)``)."""
    match = _OWN_MERGE.match(subject) or _OWN_SQUASH.search(subject)
    return int(match.group(1)) if match else None


def classify(
    message: str, *, pulls: Mapping[int, str], resolve: Callable[[str], str | None]
) -> tuple[Signal, str | None] | None:
    """Whether a commit message says it fixes an earlier commit: the signal, and the introducing
    commit it names when that commit is known (``pulls``: pull number -> the commit that landed it;
    ``resolve``: an abbreviated sha -> the full one, or None)."""
    own = own_pull_number(message.split("\n", 1)[0])

    def named(reference: str) -> str | None:
        if reference.startswith("#"):
            number = int(reference[1:])
            return None if number == own else pulls.get(number)
        return resolve(reference)

    if _REVERT.search(message):
        reverted = _REVERTED_SHA.search(message)
        return Signal.REVERT, named(reverted.group(1)) if reverted else _first_pull(message, own, pulls)
    introduced = _INTRODUCED.search(message)
    if introduced:
        return Signal.INTRODUCED, named(introduced.group(1))
    if _REGRESSION.search(message):
        return Signal.REGRESSION, _first_pull(message, own, pulls)
    if _BROKE.search(message):
        return Signal.BROKE, _first_pull(message, own, pulls)
    if _FOLLOW_UP.search(message):
        to = _FOLLOW_UP_TO.search(message)
        return Signal.FOLLOW_UP, named(to.group(1)) if to else _first_pull(message, own, pulls)
    if _FIXISH.search(message):
        pull = _first_pull(message, own, pulls)
        if pull is not None:
            return Signal.PULL_REFERENCE, pull
    return None


def _first_pull(message: str, own: int | None, pulls: Mapping[int, str]) -> str | None:
    for match in _PULL_REF.finditer(message):
        number = int(match.group(1))
        if number != own and number in pulls:
            return pulls[number]
    return None


def _ranges(lines: Sequence[int]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for number in sorted(set(lines)):
        if ranges and number == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], number)
        else:
            ranges.append((number, number))
    return ranges


# --- git ------------------------------------------------------------------------------------------


async def log_commits(repo: Path, tip: str) -> list[Commit]:
    out = await git(repo, "log", "--format=%H%x00%P%x00%ct%x00%B%x1e", tip, "--")
    commits = []
    for record in out.decode(errors="replace").split("\x1e"):
        record = record.lstrip("\n")
        if not record:
            continue
        sha, parents, time, message = record.split("\0", 3)
        commits.append(Commit(sha, tuple(parents.split()), int(time), message.strip()))
    return commits


class _Index:
    """The commits of the history: by sha (abbreviations resolved) and by the pull they landed."""

    def __init__(self, commits: Sequence[Commit]) -> None:
        self.by_sha = {c.sha: c for c in commits}
        self.sorted = sorted(self.by_sha)
        self.pulls: dict[int, str] = {}
        for commit in reversed(commits):  # oldest first: a later landing of the same number wins
            number = own_pull_number(commit.subject)
            if number is not None:
                self.pulls[number] = commit.sha

    def resolve(self, prefix: str) -> str | None:
        prefix = prefix.lower()
        at = bisect.bisect_left(self.sorted, prefix)
        matches = [s for s in self.sorted[at : at + 2] if s.startswith(prefix)]
        return matches[0] if len(matches) == 1 else None


async def _changed(repo: Path, sha: str, parent: str) -> list[str]:
    out = await git(repo, "diff", "--name-only", "-z", "--no-renames", parent, sha)
    return [p for p in out.decode(errors="replace").split("\0") if p]


async def _pair_for(repo: Path, index: _Index, candidate: Candidate, *, window_days: int) -> Pair | Drop:
    fix = candidate.fix
    if len(fix.parents) > 1:
        return Drop.MERGE
    if not fix.parents:
        return Drop.ROOT
    parent = fix.parents[0]
    diff = (await git(repo, "diff", "-w", "-M", "-U0", "--no-color", parent, fix.sha)).decode(
        errors="replace"
    )
    python = [p for p in await _changed(repo, fix.sha, parent) if is_python(p)]
    if not python:
        return Drop.NO_PYTHON
    if all(is_test_path(p) for p in python):
        return Drop.TESTS_ONLY
    fixed = {p: lines for p, lines in removed_lines(diff).items() if is_python(p) and not is_test_path(p)}
    if not fixed:  # (``git diff -w`` leaves out a file changed only in whitespace)
        return Drop.ONLY_ADDS if any(is_python(p) for p in changed_paths(diff)) else Drop.WHITESPACE
    blamed: dict[str, list[tuple[int, Blamed]]] = {}  # path at the parent -> (line there, blame)
    contents = await read_at(repo, parent, sorted(fixed))
    for path, lines in sorted(fixed.items()):
        content = contents.get(path)
        length = (
            content.text.count("\n") + (not content.text.endswith("\n")) if content and content.text else 0
        )
        # Blamed with some context: git follows a moved block only when enough of it is blamed.
        padded = _ranges(
            [
                n
                for line in lines
                for n in range(line - BLAME_CONTEXT, line + BLAME_CONTEXT + 1)
                if 1 <= n <= length
            ]
        )
        if not padded:
            continue
        spans = [arg for first, last in padded for arg in ("-L", f"{first},{last}")]
        text = (
            await git(repo, "blame", "-w", "-M", "-C", "--line-porcelain", *spans, parent, "--", path)
        ).decode(errors="replace")
        wanted = set(lines)
        blamed[path] = [(entry.final, entry) for entry in parse_blame(text) if entry.final in wanted]
    intro = candidate.named if candidate.named is not None and candidate.named in index.by_sha else None
    if intro is None:
        oldest = fix.time - window_days * DAY
        recent = [b for entries in blamed.values() for _, b in entries if b.time >= oldest]
        if not recent:
            return Drop.OUTSIDE_WINDOW
        best = max(recent, key=lambda b: (b.time, b.sha))
        if best.boundary:
            return Drop.ROOT
        intro = best.sha
    intro_commit = index.by_sha.get(intro)
    intro_parents = intro_commit.parents if intro_commit is not None else ()
    if not intro_parents:
        return Drop.ROOT
    if not any(is_python(p) for p in await _changed(repo, intro, intro_parents[0])):
        return Drop.INTRO_NO_PYTHON
    targets = await _targets(repo, intro, parent, blamed)
    total = sum(len(v) for v in fixed.values())
    return Pair(intro, fix.sha, candidate.signal, fix.subject, tuple(sorted(targets)), total)


async def _targets(
    repo: Path, intro: str, parent: str, blamed: Mapping[str, Sequence[tuple[int, Blamed]]]
) -> set[Target]:
    """The fixed lines in the introducing commit's coordinates: where blame says for the lines
    it wrote, else back through the diff from it to the fix's parent."""
    targets: set[Target] = set()
    unblamed: dict[str, list[int]] = {}
    for path, entries in blamed.items():
        for line, entry in entries:
            if entry.sha == intro:
                targets.add(Target(entry.path, entry.line))
            else:
                unblamed.setdefault(path, []).append(line)
    if not unblamed:
        return targets
    diff = (
        await git(repo, "diff", "-M", "-U0", "--no-color", intro, parent, "--", *sorted(unblamed))
    ).decode(errors="replace")
    sections = {new: (old, hunks) for old, new, hunks in file_sections(diff) if new is not None}
    listing = await git(repo, "ls-tree", "-r", "--name-only", "-z", intro, "--", *sorted(unblamed))
    at_intro = set(listing.decode(errors="replace").split("\0"))
    for path, lines in unblamed.items():
        old, hunks = sections.get(path, (path if path in at_intro else None, []))
        if old is None:
            continue
        for line in lines:
            back = map_back(hunks, line)
            if back is not None:
                targets.add(Target(old, back))
    return targets


async def mine(repo: Path, *, tip: str = "HEAD", limit: int = 40, window_days: int = 365) -> Mined:
    """The most recent ``limit`` pairs, newest fix first."""
    commits = await log_commits(repo, tip)
    index = _Index(commits)
    candidates = []
    for commit in commits:
        signal = classify(commit.message, pulls=index.pulls, resolve=index.resolve)
        if signal is not None:
            candidates.append(Candidate(commit, signal[0], signal[1]))
    return await _collect(repo, index, candidates, limit=limit, window_days=window_days)


async def _collect(
    repo: Path, index: _Index, candidates: Sequence[Candidate], *, limit: int, window_days: int
) -> Mined:
    mined = Mined(candidates=len(candidates))
    for position, candidate in enumerate(candidates):
        if len(mined.pairs) >= limit:
            mined.dropped[Drop.LIMIT] += len(candidates) - position
            break
        try:
            outcome = await _pair_for(repo, index, candidate, window_days=window_days)
        except GitError:
            outcome = Drop.GIT_ERROR
        if isinstance(outcome, Drop):
            mined.dropped[outcome] += 1
        else:
            mined.pairs.append(outcome)
    return mined


async def pairs_from_file(
    repo: Path, listing: str, *, tip: str = "HEAD", limit: int = 40, window_days: int = 365
) -> Mined:
    """Pairs a team keeps: ``INTRO<TAB>FIX`` per line (anything after a second tab is a note; blank
    lines and ``#`` comments skipped). The introducing commit is the one listed."""
    index = _Index(await log_commits(repo, tip))
    candidates: list[Candidate] = []
    unknown = 0
    for raw in listing.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        intro_ref, _, rest = raw.strip().partition("\t")
        fix_ref = rest.partition("\t")[0].strip()
        intro, fix = index.resolve(intro_ref.strip()), index.resolve(fix_ref)
        if intro is None or fix is None:
            unknown += 1
            continue
        candidates.append(Candidate(index.by_sha[fix], Signal.LISTED, intro))
    mined = await _collect(repo, index, candidates, limit=limit, window_days=window_days)
    mined.candidates += unknown
    if unknown:
        mined.dropped[Drop.UNKNOWN_COMMIT] += unknown
    return mined
