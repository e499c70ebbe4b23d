"""Overruling the bot: who may withdraw a finding, what a withdrawn finding is, and the verdict
without it. Pure: no I/O.

A finding is *overruled* on one pull request when someone who may do so disputes it in its
thread (a reply such as "false positive", ``@slug dismiss <reason>``, or a 👎 on the bot's
comment); the bot records that in the thread itself (a reply carrying an ``overruled`` marker),
so GitHub stays the source of truth for this PR. A finding is *learned* when a dispute was
remembered for the repository (``rounds.learnings``): later reviews leave it out. Either way
it is never dropped silently: the review and the check run count it.
"""

from __future__ import annotations

import enum
import hashlib
import posixpath
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass, replace

from ..core.model import Finding, ReviewResult, Severity
from ..engine.builtin import summarise, verdict_for
from .identity import Renames, matches
from .markers import decode_all, encode

OVERRULED_KIND = "overruled"
MAX_REASON_CHARS = 300


class Role(enum.StrEnum):
    """Who someone is to a pull request, for overruling (read from GitHub, never from a comment)."""

    WRITER = "writer"  # write, maintain or admin on the repository, and not the PR's author
    AUTHOR = "author"  # the PR's author (whatever their permission)
    OTHER = "other"


WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})


def role_of(*, login: str, pr_author: str | None, permission: str | None) -> Role:
    """The author alone cannot overrule a blocker on their own PR, even with write access: the
    author's role is AUTHOR first. ``permission`` is the collaborator permission API's answer
    (``role_name`` or ``permission``)."""
    if pr_author is not None and login.casefold() == pr_author.casefold():
        return Role.AUTHOR
    if (permission or "").lower() in WRITE_PERMISSIONS:
        return Role.WRITER
    return Role.OTHER


def may_overrule(severity: Severity, role: Role) -> bool:
    """Someone with write access may overrule any finding; the PR's author only concerns and nits."""
    if role is Role.WRITER:
        return True
    return role is Role.AUTHOR and severity is not Severity.BLOCKER


def severity_named(label: str) -> Severity:
    """A finding marker's severity label; an unknown label is treated as a blocker (the strictest)."""
    return {s.label: s for s in Severity}.get(label, Severity.BLOCKER)


@dataclass(frozen=True, slots=True)
class Overrule:
    """One finding withdrawn on this PR, as the bot's reply in its thread records it."""

    fingerprint: str
    key: str  # problem key (rule, path, message): recognises it after its line was edited
    rule: str
    path: str
    line: int
    severity: str
    by: str  # the login who overruled it
    reason: str  # empty for a 👎 without words
    thread: int  # the thread's root comment id
    content: str = ""  # rule + flagged text, no path: recognises it in a renamed file

    def encode(self) -> str:
        return encode(OVERRULED_KIND, **asdict(self))

    @classmethod
    def read_all(cls, body: str | None) -> list[Overrule]:
        found = []
        for data in decode_all(body, OVERRULED_KIND):
            try:
                found.append(
                    cls(
                        fingerprint=str(data["fingerprint"]),
                        key=str(data.get("key", "")),
                        rule=str(data["rule"]),
                        path=str(data["path"]),
                        line=int(data["line"]),
                        severity=str(data["severity"]),
                        by=str(data["by"]),
                        reason=str(data.get("reason", "")),
                        thread=int(data["thread"]),
                        content=str(data.get("content", "")),
                    )
                )
            except (KeyError, TypeError, ValueError):
                continue
        return found


def recorded_severity(label: str) -> Severity:
    """The severity a decision was recorded for, as a cap on what it withdraws: an unknown label
    is the lowest (a decision withdraws nothing more severe than it is known to have seen)."""
    return {s.label: s for s in Severity}.get(label, Severity.NIT)


def overrules(overruled: Collection[Overrule], finding: Finding, renames: Renames | None = None) -> bool:
    """Whether ``finding`` is one of the overruled ones, at whatever line it is now (and under its
    new name in a renamed file): ``identity.matches``, and never more severe than the finding the
    overrule was recorded for (an author's overrule of a concern never withdraws a blocker)."""
    return any(
        matches(o, finding, renames or {}) and finding.severity <= recorded_severity(o.severity)
        for o in overruled
    )


# ------------------------------------------------------------------------------- learnings keys
@dataclass(frozen=True, slots=True)
class PathPattern:
    """Where a learning applies: files of one directory with one extension (``tests/*.py``).
    Kept as two plain strings compared exactly: a path from a pull request is never evaluated as
    a glob."""

    directory: str
    extension: str

    @classmethod
    def of(cls, path: str) -> PathPattern:
        directory, name = posixpath.split(path)
        extension = posixpath.splitext(name)[1]
        return cls(directory, extension)

    def matches(self, path: str) -> bool:
        return PathPattern.of(path) == self

    def __str__(self) -> str:
        name = f"*{self.extension}" if self.extension else "*"
        return f"{self.directory}/{name}" if self.directory else name


def normalised_line(text: str) -> str:
    """The code line as a learning compares it: surrounding and repeated whitespace ignored."""
    return " ".join(text.split())


LINE_DIGEST_CHARS = 64  # sha256: a learning keyed by its code line (content digests are shorter)


def line_digest(text: str) -> str:
    """What is stored of the code line: a digest (the line itself may hold a secret)."""
    return hashlib.sha256(normalised_line(text).encode()).hexdigest()


# A learning stored before learnings kept their severity: it never withdraws a blocker.
LEGACY_LEARNING_CAP = Severity.CONCERN


@dataclass(frozen=True, slots=True)
class LearningKey:
    """A learning's fingerprint: rule, path pattern, and what was flagged: the finding's content
    digest (its flagged text and evidence: the expression, the ref checked out, the secret's
    digest), or for a learning stored before that, the digest of the code line it was on (64 hex
    digits). ``severity``: the most severe finding it withdraws (None: stored before learnings
    kept it, ``LEGACY_LEARNING_CAP``)."""

    rule: str
    pattern: PathPattern
    line_sha: str
    severity: Severity | None = None

    @classmethod
    def of(cls, rule: str, path: str, line_text: str, severity: Severity | None = None) -> LearningKey:
        return cls(rule, PathPattern.of(path), line_digest(line_text), severity)

    @classmethod
    def of_content(cls, rule: str, path: str, content: str, severity: Severity) -> LearningKey:
        return cls(rule, PathPattern.of(path), content, severity)

    def matches(self, finding: Finding, line_text: str | None) -> bool:
        if finding.rule != self.rule or not self.pattern.matches(finding.path):
            return False
        if finding.severity > (self.severity if self.severity is not None else LEGACY_LEARNING_CAP):
            return False
        if len(self.line_sha) != LINE_DIGEST_CHARS:  # the finding's own content: its evidence
            return bool(finding.content) and finding.content == self.line_sha
        return line_text is not None and line_digest(line_text) == self.line_sha


# ----------------------------------------------------------------------------------- withdrawal
def withdraw(
    result: ReviewResult,
    *,
    overruled: Collection[Overrule] = (),
    learned: Collection[LearningKey] = (),
    line_text: Mapping[str, Mapping[int, str]] | None = None,
    changed: int,
    renames: Renames | None = None,
) -> ReviewResult:
    """The result without the overruled and learned findings, its verdict and summary re-decided.

    ``line_text``: per path, the head line text of the lines the PR added (what a learning is
    compared with). ``changed``: the number of changed files (for the summary). ``renames``: the
    files renamed in the PR or since the last review (an overrule follows its file)."""
    texts = line_text or {}
    kept: list[Finding] = []
    dropped: list[Finding] = []
    forgotten: list[Finding] = []
    for finding in result.findings:
        if overrules(overruled, finding, renames):
            dropped.append(finding)
        elif any(k.matches(finding, texts.get(finding.path, {}).get(finding.line)) for k in learned):
            forgotten.append(finding)
        else:
            kept.append(finding)
    if not dropped and not forgotten:
        return result
    notes = list(result.notes)
    notes += withdrawn_notes(len(dropped), len(forgotten))
    return replace(
        result,
        verdict=verdict_for(kept, incomplete=result.incomplete),
        summary=summarise(
            kept, changed=changed, analysed=result.analysed, skipped=result.skipped, notes=notes
        ),
        findings=tuple(kept),
        overruled=result.overruled + tuple(dropped),
        learned=result.learned + tuple(forgotten),
    )


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def withdrawn_notes(overruled: int, learned: int) -> list[str]:
    notes = []
    if overruled:
        notes.append(f"{_plural(overruled, 'finding')} overruled on this pull request")
    if learned:
        notes.append(f"{_plural(learned, 'finding')} left out by the repository's learnings")
    return notes


def overruled_by_marker(bodies: Iterable[str | None]) -> list[Overrule]:
    """Every overrule recorded in these bodies (the bot's own replies only: the caller filters).
    A thread's first reply that records any counts: one finding, or every one a comment held
    (a retried job's second reply is ignored)."""
    first: dict[int, int] = {}  # thread -> the index of the body that recorded it
    found = []
    for index, body in enumerate(bodies):
        for item in Overrule.read_all(body):
            if first.setdefault(item.thread, index) == index:
                found.append(item)
    return found
