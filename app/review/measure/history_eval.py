"""``python -m app eval --history DIR``: a reviewer's recall on a repository's own regressions.

Each mined pair's introducing commit is reviewed exactly as a pull request (``review --git
intro~1..intro``) by the configured reviewer, and scored by location, deterministically: a *hit*
is a finding of concern or above whose lines come within ``tolerance`` lines of a target (a line
the fix later changed, in the introducing commit's coordinates); *not visible* means no target
was in what the reviewer was shown (a hunk of a file it reviewed), which separates "could not
see it" from "missed it". Beside the recall, the same reviewer's blockers and concerns per 100
ordinary commits (``review --commits``), so recall is never read without its cost.
"""

from __future__ import annotations

import enum
import json
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.diff import parse_patch
from ..core.model import Finding, Reviewer, ReviewResult, Severity
from .history import History, review_commits
from .history_mine import Mined, Pair, Target
from .local import GitError, RangeReview

__all__ = ["Detection", "HistoryReport", "PairResult", "evaluate_history", "hits_of", "score", "shown_lines"]

DEFAULT_TOLERANCE = 3


class Detection(enum.StrEnum):
    """Whether the review of a pair's introducing commit flagged the regression's lines."""

    HIT = "hit"
    MISSED = "missed"
    NOT_VISIBLE = "not visible"
    ERROR = "error"


def shown_lines(result: ReviewResult, patches: Mapping[str, str | None]) -> dict[str, frozenset[int]]:
    """Path -> the head lines the reviewer was shown: what the model's prompts held, when a model
    reviewed; else the hunks of the files it reviewed (analysed, not left out by the model)."""
    if result.prompt_lines:
        shown: dict[str, set[int]] = {}
        for path, line in result.prompt_lines:
            shown.setdefault(path, set()).add(line)
        return {path: frozenset(lines) for path, lines in shown.items()}
    left_out = {s.path for s in result.model_skipped}
    return {
        path: parse_patch(patches.get(path)).right_lines
        for path in result.analysed
        if path not in left_out and patches.get(path)
    }


def hits_of(findings: Sequence[Finding], targets: Collection[Target], tolerance: int) -> list[Finding]:
    """The findings (concern or above) whose lines come within ``tolerance`` of a target."""
    by_path: dict[str, list[int]] = {}
    for target in targets:
        by_path.setdefault(target.path, []).append(target.line)
    out = []
    for f in findings:
        if f.severity < Severity.CONCERN:
            continue
        first = f.start_line if f.start_line is not None else f.line
        if any(first - tolerance <= line <= f.line + tolerance for line in by_path.get(f.path, ())):
            out.append(f)
    return out


def score(
    targets: Collection[Target],
    findings: Sequence[Finding],
    shown: Mapping[str, frozenset[int]],
    *,
    tolerance: int = DEFAULT_TOLERANCE,
) -> tuple[Detection, list[Finding], int]:
    """The pair's outcome, the hitting findings, and how many targets were shown."""
    visible = sum(1 for t in targets if t.line in shown.get(t.path, frozenset()))
    hits = hits_of(findings, targets, tolerance)
    if hits:
        return Detection.HIT, hits, visible
    return (Detection.MISSED if visible else Detection.NOT_VISIBLE), [], visible


@dataclass(frozen=True, slots=True)
class PairResult:
    pair: Pair
    outcome: Detection
    hits: tuple[Finding, ...] = ()
    findings: int = 0  # concern or above, anywhere in the introducing commit
    visible: int = 0  # targets shown to the reviewer
    seconds: float = 0.0
    tokens: int = 0
    error: str | None = None

    def line(self) -> str:
        subject = self.pair.subject if len(self.pair.subject) <= 50 else self.pair.subject[:49] + "\u2026"
        rules = ",".join(sorted({f.rule for f in self.hits}))
        return (
            f"{self.pair.intro[:10]} <- {self.pair.fix[:10]}  {self.outcome.value:<11}  "
            f"{self.visible:>3}/{len(self.pair.targets):<3}  {self.findings:>3}  {self.seconds:6.2f}s  "
            f"{self.pair.signal.value:<14}  {subject}"
            + (f"  [{rules}]" if rules else "")
            + (f"  ERROR {self.error}" if self.error else "")
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "intro": self.pair.intro,
            "fix": self.pair.fix,
            "signal": self.pair.signal.value,
            "subject": self.pair.subject,
            "outcome": self.outcome.value,
            "targets": [{"path": t.path, "line": t.line} for t in self.pair.targets],
            "visible": self.visible,
            "findings": self.findings,
            "hits": [
                {
                    "path": f.path,
                    "line": f.line,
                    "severity": f.severity.label,
                    "rule": f.rule,
                    "message": f.message,
                }
                for f in self.hits
            ],
            "seconds": round(self.seconds, 3),
            "tokens": self.tokens,
            "error": self.error,
        }


@dataclass(slots=True)
class HistoryReport:
    reviewer: str
    mined: Mined
    tolerance: int = DEFAULT_TOLERANCE
    results: list[PairResult] = field(default_factory=list)
    precision: History = field(default_factory=History)

    def count(self, outcome: Detection) -> int:
        return sum(1 for r in self.results if r.outcome is outcome)

    def totals(self) -> dict[str, Any]:
        hit, missed = self.count(Detection.HIT), self.count(Detection.MISSED)
        pairs = len(self.results) - self.count(Detection.ERROR)
        by_rule: Counter[str] = Counter(rule for r in self.results for rule in {f.rule for f in r.hits})
        by_severity: Counter[str] = Counter(
            max(f.severity for f in r.hits).label for r in self.results if r.hits
        )
        precision = self.precision.totals()
        return {
            "reviewer": self.reviewer,
            "tolerance": self.tolerance,
            "candidates": self.mined.candidates,
            "pairs": pairs,
            "dropped": {reason.name.lower(): n for reason, n in sorted(self.mined.dropped.items())},
            "hit": hit,
            "missed": missed,
            "not_visible": self.count(Detection.NOT_VISIBLE),
            "errors": self.count(Detection.ERROR),
            "recall": round(hit / pairs, 4) if pairs else 0.0,
            "recall_of_visible": round(hit / (hit + missed), 4) if hit + missed else 0.0,
            "hits_by_rule": dict(sorted(by_rule.items(), key=lambda item: (-item[1], item[0]))),
            "hits_by_severity": dict(by_severity),
            "seconds": round(sum(r.seconds for r in self.results), 2),
            "tokens": sum(r.tokens for r in self.results),
            "ordinary_commits": {
                "reviewed": precision["reviewed"],
                "per_100_commits": {
                    k: v for k, v in precision["per_100_commits"].items() if k in ("blocker", "concern")
                },
                "by_rule": precision["by_rule"],
            },
        }

    def as_json(self) -> str:
        return json.dumps(
            {
                "totals": self.totals(),
                "pairs": [r.as_dict() for r in self.results],
                "ordinary_commits": [r.as_dict() for r in self.precision.reviews],
            },
            indent=2,
        )

    def report(self) -> str:
        t = self.totals()
        pairs = t["pairs"]
        dropped = sum(self.mined.dropped.values())
        lines = [
            f"reviewer: {self.reviewer}; {t['candidates']} candidate fixes, {pairs} pairs"
            + (f", {dropped} dropped:" if dropped else ""),
        ]
        lines += [f"  {n:>4}  {reason.value}" for reason, n in self.mined.dropped.most_common()]
        lines += [
            f"recall: {t['hit']}/{pairs} pairs hit ({t['recall']:.0%}); "
            f"{t['hit']}/{t['hit'] + t['missed']} of the visible ({t['recall_of_visible']:.0%}); "
            f"{t['missed']} missed, {t['not_visible']} not visible"
            + (f", {t['errors']} could not be reviewed" if t["errors"] else "")
            + f" (tolerance {self.tolerance} lines)",
        ]
        if t["hits_by_rule"]:
            lines.append("hits by rule: " + ", ".join(f"{rule} {n}" for rule, n in t["hits_by_rule"].items()))
            lines.append(
                "hits by severity: " + ", ".join(f"{s} {n}" for s, n in t["hits_by_severity"].items())
            )
        ordinary = t["ordinary_commits"]
        per_100 = ordinary["per_100_commits"]
        lines.append(
            f"ordinary commits: {ordinary['reviewed']} reviewed; per 100 commits: "
            f"{per_100.get('blocker', 0.0):.1f} blockers, {per_100.get('concern', 0.0):.1f} concerns"
        )
        lines.append(f"time: {t['seconds']:.1f} s; tokens: {t['tokens']}")
        return "\n".join(lines)


async def review_pair(
    repo: Path, pair: Pair, reviewer: Reviewer, review: RangeReview, *, tolerance: int
) -> PairResult:
    before = reviewer.tokens_used()
    started = time.perf_counter()
    try:
        context, result = await review(repo, base=f"{pair.intro}^1", tip=pair.intro)
    except GitError as exc:
        return PairResult(pair, Detection.ERROR, seconds=time.perf_counter() - started, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - one pair the reviewer fails on is reported, not fatal
        error = f"the reviewer failed: {type(exc).__name__}: {exc}"
        return PairResult(pair, Detection.ERROR, seconds=time.perf_counter() - started, error=error)
    seconds = time.perf_counter() - started
    shown = shown_lines(result, {f.path: f.patch for f in context.files})
    outcome, hits, visible = score(pair.targets, result.findings, shown, tolerance=tolerance)
    return PairResult(
        pair,
        outcome,
        hits=tuple(hits),
        findings=sum(1 for f in result.findings if f.severity >= Severity.CONCERN),
        visible=visible,
        seconds=seconds,
        tokens=reviewer.tokens_used() - before,
    )


async def evaluate_history(
    repo: Path,
    mined: Mined,
    reviewer: Reviewer,
    *,
    review: RangeReview,
    label: str,
    tip: str = "HEAD",
    commits: int = 50,
    tolerance: int = DEFAULT_TOLERANCE,
    progress: Callable[[str], None] | None = None,
) -> HistoryReport:
    """Review every pair's introducing commit, then ``commits`` ordinary first-parent commits (none
    that is a pair's fix or introducing commit), each through ``review``; ``reviewer`` is the engine
    it runs (its tokens are counted)."""
    report = HistoryReport(reviewer=label, mined=mined, tolerance=tolerance)
    for pair in mined.pairs:
        result = await review_pair(repo, pair, reviewer, review, tolerance=tolerance)
        report.results.append(result)
        if progress is not None:
            progress(result.line())
    if commits > 0:
        in_pairs = {sha for pair in mined.pairs for sha in (pair.intro, pair.fix)}
        async for reviewed in review_commits(repo, tip=tip, count=commits, review=review, skip=in_pairs):
            report.precision.add(reviewed)
    return report
