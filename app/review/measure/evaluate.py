"""``python -m app eval``: measure a reviewer on a corpus of cases.

A case is a directory: ``base/`` (the tree before), ``change.patch`` (``git diff`` output, applied
with ``git apply``) and ``case.yaml``::

    description: A loop that skips the last item.
    kind: logic/off-by-one          # "clean" for a change that must get no blocker
    defects:                        # what a good reviewer must find (head line numbers)
      - path: stats.py
        lines: [4, 4]

A defect counts as found when some finding on its file touches its line range (findings of any
severity: the point is whether the reviewer noticed). A blocker on a clean case is a false
blocker. Each case is reviewed like a local ``review --git`` (a throwaway git repository),
through the bot's own pipeline (``local.RangeReview``), so the settings, the engine, the selection, the
model's prompt and the withdrawals are exactly the bot's.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..core.model import Finding, Reviewer, Severity
from .local import GitError, RangeReview, git

DEFAULT_CASES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "review_cases"


@dataclass(frozen=True, slots=True)
class Defect:
    path: str
    first: int
    last: int

    def found_by(self, findings: Sequence[Finding]) -> bool:
        for f in findings:
            start = f.start_line if f.start_line is not None else f.line
            if f.path == self.path and start <= self.last and f.line >= self.first:
                return True
        return False


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    kind: str
    description: str
    directory: Path
    defects: tuple[Defect, ...]

    @property
    def clean(self) -> bool:
        return not self.defects


@dataclass(slots=True)
class CaseResult:
    name: str
    kind: str
    expected: int
    found: int
    blockers: int
    findings: int
    tokens: int
    seconds: float
    error: str | None = None


@dataclass(slots=True)
class Report:
    reviewer: str
    cases: list[CaseResult] = field(default_factory=list)

    @property
    def expected(self) -> int:
        return sum(c.expected for c in self.cases)

    @property
    def found(self) -> int:
        return sum(c.found for c in self.cases)

    @property
    def recall(self) -> float:
        return self.found / self.expected if self.expected else 0.0

    @property
    def clean_cases(self) -> int:
        return sum(1 for c in self.cases if c.expected == 0)

    @property
    def false_blockers(self) -> int:
        """Clean cases that got a blocker."""
        return sum(1 for c in self.cases if c.expected == 0 and c.blockers)

    @property
    def tokens(self) -> int:
        return sum(c.tokens for c in self.cases)

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.cases)

    def as_json(self) -> str:
        return json.dumps(
            {
                "reviewer": self.reviewer,
                "recall": round(self.recall, 4),
                "found": self.found,
                "expected": self.expected,
                "false_blockers": self.false_blockers,
                "clean_cases": self.clean_cases,
                "tokens": self.tokens,
                "seconds": round(self.seconds, 3),
                "cases": [asdict(c) | {"seconds": round(c.seconds, 3)} for c in self.cases],
            },
            indent=2,
        )

    def as_text(self) -> str:
        width = max([len(c.name) for c in self.cases] + [4])
        kinds = max([len(c.kind) for c in self.cases] + [4])
        lines = [
            f"reviewer: {self.reviewer} ({len(self.cases)} cases, {self.clean_cases} clean)",
            f"{'case':<{width}}  {'kind':<{kinds}}  found  blockers  tokens  seconds",
        ]
        for c in self.cases:
            found = f"{c.found}/{c.expected}" if c.expected else "-"
            row = f"{c.name:<{width}}  {c.kind:<{kinds}}  {found:>5}  {c.blockers:>8}  {c.tokens:>6}"
            lines.append(f"{row}  {c.seconds:>7.2f}" + (f"  ERROR {c.error}" if c.error else ""))
        per_case = self.seconds / len(self.cases) if self.cases else 0.0
        lines += [
            "",
            f"recall: {self.found}/{self.expected} defects ({self.recall:.0%}); "
            f"false blockers: {self.false_blockers} of {self.clean_cases} clean cases; "
            f"tokens: {self.tokens}; time: {self.seconds:.1f} s ({per_case:.2f} s per case)",
        ]
        return "\n".join(lines)


def load_cases(directory: Path) -> list[Case]:
    cases = []
    for case_dir in sorted(p for p in directory.iterdir() if (p / "case.yaml").is_file()):
        data: dict[str, Any] = yaml.safe_load((case_dir / "case.yaml").read_text()) or {}
        defects = tuple(
            Defect(str(d["path"]), int(d["lines"][0]), int(d["lines"][-1])) for d in data.get("defects") or ()
        )
        cases.append(
            Case(
                name=case_dir.name,
                kind=str(data.get("kind") or ("clean" if not defects else "defect")),
                description=str(data.get("description") or ""),
                directory=case_dir,
                defects=defects,
            )
        )
    return cases


async def _materialise(case: Case, repo: Path) -> None:
    shutil.copytree(case.directory / "base", repo, dirs_exist_ok=True)
    await git(repo, "init", "-q", "-b", "main")
    for key, value in (("user.email", "eval@revbot.invalid"), ("user.name", "revbot eval")):
        await git(repo, "config", key, value)
    await git(repo, "add", "-A")
    await git(repo, "commit", "-q", "-m", "base")
    await git(repo, "apply", str((case.directory / "change.patch").resolve()))
    await git(repo, "add", "-A")
    await git(repo, "commit", "-q", "-m", "change")


async def run_case(case: Case, reviewer: Reviewer, review: RangeReview) -> CaseResult:
    before = reviewer.tokens_used()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="revbot-eval-") as tmp:
        repo = Path(tmp)
        try:
            await _materialise(case, repo)
            _, result = await review(repo, base="HEAD~1", tip="HEAD", title=case.description)
        except GitError as exc:
            return CaseResult(case.name, case.kind, len(case.defects), 0, 0, 0, 0, 0.0, error=str(exc))
    seconds = time.perf_counter() - started
    return CaseResult(
        name=case.name,
        kind=case.kind,
        expected=len(case.defects),
        found=sum(1 for d in case.defects if d.found_by(result.findings)),
        blockers=sum(1 for f in result.findings if f.severity is Severity.BLOCKER),
        findings=len(result.findings),
        tokens=reviewer.tokens_used() - before,
        seconds=seconds,
    )


async def evaluate(cases: Sequence[Case], reviewer: Reviewer, *, label: str, review: RangeReview) -> Report:
    """``reviewer``: the engine ``review`` runs (its tokens are counted per case)."""
    report = Report(reviewer=label)
    for case in cases:
        report.cases.append(await run_case(case, reviewer, review))
    return report
