"""A finding's identity across the rounds of one pull request, and what a re-review comments on.
Pure: no I/O.

A finding is the same finding from one head to the next when its fingerprint (rule, path, the
flagged text: never its line number) is the same, or its problem key (rule, path, message and
its evidence: its text was edited), or, in a file renamed since, its content digest (rule and
flagged text, no path) is the same at the new path. The evidence (the expression a workflow
expands, a digest of a secret) keeps two findings whose messages read the same apart. The bot's
open threads and the overrules it recorded are matched to the current findings this way: an open
thread whose finding still stands is neither posted again nor resolved, and an overruled finding
stays withdrawn wherever its line moved, never one more severe than it was.

A re-review comments inline only on the lines changed since the bot's last reviewed head
(``Delta``); after a force-push that rewrote history there is no such delta, and the review is
a full one that says so.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.diff import parse_patch
from ..core.model import Finding
from .markers import problem_key

Renames = Mapping[str, str]
"""Old path -> new path, for the files renamed in the pull request or since the last review."""

MAX_COMPARE_FILES = 300  # GitHub's compare lists at most this many files: more, and it is cut


class Recorded(Protocol):
    """What an earlier round recorded of a finding: a thread's ``FindingMarker``, an ``Overrule``."""

    @property
    def fingerprint(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def path(self) -> str: ...


def matches(identity: Recorded, finding: Finding, renames: Renames, *, by_key: bool = True) -> bool:
    """Whether ``finding`` at head is the finding ``identity`` was recorded for: the same flagged
    text (its fingerprint, or its content in the file renamed since), or with ``by_key`` the same
    problem (rule, path, message) whose text was edited."""
    renamed = renames.get(identity.path) == finding.path
    if identity.fingerprint == finding.fingerprint or (
        renamed and identity.content and identity.content == finding.content
    ):
        return True
    if not by_key or not identity.key:
        return False
    path = identity.path if renamed else finding.path
    return identity.key == problem_key(finding.rule, path, finding.problem)


def stands(identity: Recorded, findings: Iterable[Finding], renames: Renames) -> bool:
    """Whether the recorded finding is still among ``findings`` (at any line)."""
    return any(matches(identity, f, renames) for f in findings)


def held(findings: Sequence[Finding], identities: Sequence[Recorded], renames: Renames) -> list[bool]:
    """For each of ``findings``, whether one of ``identities`` (the bot's open threads) holds it.
    A thread holds one finding: the one with its flagged text first, else one with its problem
    key (a second finding with the same message is another occurrence, not this thread's)."""
    taken = [False] * len(findings)
    left = list(identities)
    for by_key in (False, True):
        for identity in list(left):
            for index, finding in enumerate(findings):
                if not taken[index] and matches(identity, finding, renames, by_key=by_key):
                    taken[index] = True
                    left.remove(identity)
                    break
    return taken


def renames_in(files: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The renames a REST file list (a pull request's, a comparison's) shows: old -> new."""
    return {
        str(f["previous_filename"]): str(f["filename"])
        for f in files
        if f.get("status") == "renamed" and f.get("previous_filename") and f.get("filename")
    }


class Scope(enum.StrEnum):
    """How much of the pull request a review comments on inline."""

    FULL = "full"  # the first review, or a re-review of the same head
    DELTA = "delta"  # the lines changed since the last reviewed head
    REWRITTEN = "rewritten"  # history was rewritten since: a full review that says so


@dataclass(frozen=True, slots=True)
class Delta:
    scope: Scope
    since: str = ""  # the last reviewed head
    lines: Mapping[str, frozenset[int]] | None = None  # per path, head lines changed since; None: all
    renames: Mapping[str, str] | None = None

    @property
    def note(self) -> str | None:
        """The one sentence the review body says about its scope (None: nothing to say)."""
        if self.scope is Scope.DELTA:
            return f"Inline comments only on lines changed since my last review at {self.since[:12]}."
        if self.scope is Scope.REWRITTEN:
            return (
                f"History was rewritten since my last review at {self.since[:12]}, so this is a full review."
            )
        return None


def delta_of(since: str | None, head_sha: str, comparison: Mapping[str, Any] | None) -> Delta:
    """The scope of a review at ``head_sha`` whose last reviewed head was ``since``, from
    GitHub's comparison of the two (None: GitHub no longer knows ``since``)."""
    if not since or since == head_sha:
        return Delta(Scope.FULL)
    if comparison is None or comparison.get("status") in ("behind", "diverged"):
        return Delta(Scope.REWRITTEN, since)
    files = list(comparison.get("files") or [])
    if comparison.get("status") != "ahead" or len(files) >= MAX_COMPARE_FILES:
        return Delta(Scope.FULL, since)
    lines = {
        str(f["filename"]): parse_patch(str(f.get("patch") or "")).added for f in files if f.get("filename")
    }
    return Delta(Scope.DELTA, since, lines, renames_in(files))


def in_delta(finding: Finding, delta: Delta) -> bool:
    """Whether a re-review may comment on ``finding`` inline: its lines changed since the last
    reviewed head (a file-level or multi-line finding: any of its lines)."""
    if delta.lines is None:
        return True
    changed = delta.lines.get(finding.path, frozenset())
    first = finding.start_line if finding.start_line is not None else finding.line
    return any(n in changed for n in range(first, finding.line + 1))
