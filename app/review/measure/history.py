"""``python -m app review --commits N``: the built-in reviewer over a repository's own history.

Each of the last N first-parent commits is reviewed as the pull request it was (its diff against
its first parent: for a merge commit, everything the merged branch brought), one line each, then
the totals: findings by severity and by rule, blockers per 100 commits and the time per commit.
Anyone can see what the bot would have said on their repository before installing it.
Nothing is posted and the repository's code is never executed.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.model import Finding, Severity
from .local import GitError, RangeReview, git

__all__ = ["CommitReview", "History", "first_parent_commits", "review_commits"]

SEVERITIES = (Severity.BLOCKER, Severity.CONCERN, Severity.NIT)


@dataclass(frozen=True, slots=True)
class CommitReview:
    sha: str
    subject: str
    seconds: float
    verdict: str | None = None  # None: the commit could not be reviewed (``error`` says why)
    summary: str = ""
    findings: tuple[Finding, ...] = ()
    error: str | None = None

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)

    def line(self) -> str:
        subject = self.subject if len(self.subject) <= 60 else self.subject[:59] + "\u2026"
        if self.verdict is None:
            return f"{self.sha[:12]}  {'ERROR':<15}  {'':10}  {self.seconds:6.2f}s  {subject}: {self.error}"
        counts = "  ".join(f"{self.count(s)}{s.label[0]}" for s in SEVERITIES)
        return f"{self.sha[:12]}  {self.verdict:<15}  {counts}  {self.seconds:6.2f}s  {subject}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "sha": self.sha,
            "subject": self.subject,
            "seconds": round(self.seconds, 3),
            "verdict": self.verdict,
            "summary": self.summary,
            "error": self.error,
            "findings": [
                {
                    "path": f.path,
                    "line": f.line,
                    "severity": f.severity.label,
                    "rule": f.rule,
                    "message": f.message,
                }
                for f in self.findings
            ],
        }


@dataclass(slots=True)
class History:
    """The totals over the reviewed commits."""

    reviews: list[CommitReview] = field(default_factory=list)

    def add(self, review: CommitReview) -> None:
        self.reviews.append(review)

    @property
    def reviewed(self) -> list[CommitReview]:
        return [r for r in self.reviews if r.verdict is not None]

    def per_100(self, severity: Severity) -> float:
        reviewed = self.reviewed
        total = sum(r.count(severity) for r in reviewed)
        return 100.0 * total / len(reviewed) if reviewed else 0.0

    def totals(self) -> dict[str, Any]:
        reviewed = self.reviewed
        times = [r.seconds for r in reviewed]
        by_rule = Counter((f.severity.label, f.rule) for r in reviewed for f in r.findings)
        return {
            "commits": len(self.reviews),
            "reviewed": len(reviewed),
            "errors": len(self.reviews) - len(reviewed),
            "verdicts": dict(Counter(r.verdict for r in reviewed if r.verdict is not None)),
            "findings": {s.label: sum(r.count(s) for r in reviewed) for s in SEVERITIES},
            "per_100_commits": {s.label: round(self.per_100(s), 1) for s in SEVERITIES},
            "commits_with_blockers": sum(1 for r in reviewed if r.count(Severity.BLOCKER)),
            "by_rule": [
                {"severity": severity, "rule": rule, "findings": count}
                for (severity, rule), count in sorted(
                    by_rule.items(), key=lambda item: (-Severity[item[0][0].upper()], -item[1], item[0][1])
                )
            ],
            "seconds": {
                "total": round(sum(times), 2),
                "p50": round(statistics.median(times), 3) if times else 0.0,
                "max": round(max(times), 3) if times else 0.0,
            },
        }

    def report(self) -> str:
        totals = self.totals()
        findings, per_100, seconds = totals["findings"], totals["per_100_commits"], totals["seconds"]
        lines = [
            f"{totals['reviewed']} commits reviewed"
            + (f", {totals['errors']} could not be" if totals["errors"] else "")
            + f"; verdicts: {', '.join(f'{n} {v}' for v, n in sorted(totals['verdicts'].items())) or 'none'}",
            "findings: " + ", ".join(f"{findings[s.label]} {s.label}" for s in SEVERITIES),
            "per 100 commits: " + ", ".join(f"{per_100[s.label]:.1f} {s.label}s" for s in SEVERITIES),
            f"commits with blockers: {totals['commits_with_blockers']}",
            f"time per commit: p50 {seconds['p50']:.2f} s, max {seconds['max']:.2f} s"
            f" (total {seconds['total']:.1f} s)",
        ]
        blockers = [(r, f) for r in self.reviewed for f in r.findings if f.severity is Severity.BLOCKER]
        if blockers:
            lines.append("blockers:")
            lines += [f"  {r.sha[:12]}  {f.path}:{f.line}  {f.rule}  {f.message}" for r, f in blockers]
        if totals["by_rule"]:
            lines.append("by rule:")
            width = max(len(row["rule"]) for row in totals["by_rule"])
            lines += [
                f"  {row['severity']:<7}  {row['rule']:<{width}}  {row['findings']}"
                for row in totals["by_rule"]
            ]
        return "\n".join(lines)


async def first_parent_commits(repo: Path, tip: str, count: int) -> list[tuple[str, str, bool]]:
    """(sha, subject, has a parent) for the last ``count`` first-parent commits, newest first."""
    out = await git(repo, "log", "--first-parent", f"-n{count}", "--format=%H%x00%P%x00%s", tip, "--")
    commits = []
    # One record per "\n" (``splitlines`` would also split a subject at its "\r" or "\x85")
    for line in filter(None, out.decode(errors="replace").split("\n")):
        sha, parents, subject = line.split("\0", 2)
        commits.append((sha, subject, bool(parents.strip())))
    return commits


async def review_commits(
    repo: Path,
    *,
    tip: str = "HEAD",
    count: int,
    review: RangeReview,
    clock: Callable[[], float] = time.perf_counter,
    skip: Collection[str] = frozenset(),
) -> AsyncIterator[CommitReview]:
    """Review each commit against its first parent, newest first; a commit that cannot be reviewed
    (the root commit, a git error) is reported, not fatal. Commits in ``skip`` (``eval
    --history``'s regression pairs) are passed over, and ``count`` others reviewed."""
    listed = await first_parent_commits(repo, tip, count + len(skip))
    for sha, subject, has_parent in [c for c in listed if c[0] not in skip][:count]:
        started = clock()
        if not has_parent:
            yield CommitReview(sha, subject, 0.0, error="the root commit has no parent to compare with")
            continue
        try:
            _, result = await review(repo, base=f"{sha}^1", tip=sha)
        except GitError as exc:
            yield CommitReview(sha, subject, clock() - started, error=str(exc))
            continue
        yield CommitReview(
            sha,
            subject,
            clock() - started,
            verdict=result.verdict.value,
            summary=result.summary,
            findings=result.findings,
        )
