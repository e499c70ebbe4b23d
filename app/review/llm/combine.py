"""The model reviewer's result: the built-in review and what the model's work produced
(``ModelWork``), combined into one ``ReviewResult``. Pure.

The model's findings are checked (``checks``) and the ``review.llm.max_findings`` most important
kept (injection reports never capped); the summary says what the model did and what it left out;
the verdict comes from the severities as for the built-in reviewer, and ``trust`` says whether
approval is withheld.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analyzers.injection import RULE as INJECTION_RULE
from ..core.model import Finding, PullContext, ReviewResult, Skipped, Verdict
from ..engine.builtin import deduplicate, summarise, verdict_for
from . import trust
from .checks import check_findings
from .client import Tally
from .schema import ModelFinding

__all__ = ["ModelWork", "combine"]


@dataclass(slots=True)
class ModelWork:
    """What one review's model work produced."""

    findings: list[ModelFinding] = field(default_factory=list)
    not_reviewed: list[Skipped] = field(default_factory=list)
    reviewed: int = 0
    outside: int = 0  # findings on a file the request did not show: dropped
    cached: int = 0
    tally: Tally = field(default_factory=Tally)  # the requests sent and their tokens
    today: str = ""  # the installation's usage today, for the footer
    line_counts: dict[str, int] = field(default_factory=dict)  # path -> lines at head, when read
    given: list[str] = field(default_factory=list)  # the files the model was to review
    confirmed: set[str] = field(default_factory=set)  # ... that it said "reviewed, nothing found" for
    reported: set[str] = field(default_factory=set)  # ... that it said "findings" for, with some
    injection: list[Finding] = field(default_factory=list)  # untrusted answers, steering reports
    untrusted: int = 0  # answers without their request's canary
    related_cut: int = 0  # related definitions and call sites left out of the prompts (budget)
    shown: set[tuple[str, int]] = field(default_factory=set)  # what the model reviewed was shown


def combine(
    context: PullContext,
    base: ReviewResult,
    work: ModelWork,
    *,
    model: str,
    usage: tuple[str, ...],
    notes: list[str],
    skipped: str | None = None,
) -> ReviewResult:
    """``model``: the model's name, for the summary; ``usage``: the footer's lines; ``skipped``:
    why the model did not review the pull request at all."""
    checked, dropped, merged = check_findings(
        work.findings,
        files=context.files,
        builtin=base.findings,
        line_counts=work.line_counts,
        blockers=context.model.blockers,
    )
    dropped += work.outside
    checked.sort(key=lambda item: (-item[1].severity, -item[0], item[1].path, item[1].line))
    cap = context.model.max_findings
    shown = [f for _, f in checked[:cap]]
    extra = _work_notes(
        work, model=model, over_cap=len(checked) - cap, cap=cap, merged=merged, dropped=dropped
    )
    order = {f.path: i for i, f in enumerate(context.files)}
    findings = deduplicate(
        sorted(
            [*base.findings, *shown, *work.injection],  # injection reports: never capped
            key=lambda f: (order.get(f.path, len(order)), f.path, f.line, -f.severity, f.rule),
        )
    )
    incomplete = base.verdict is not verdict_for(base.findings)
    verdict = verdict_for(findings, incomplete=incomplete)
    injected = trust.injection_withheld(
        {f.rule for f in findings}, model_read=work.reviewed > 0, tripwire=INJECTION_RULE
    )
    # A file it reported on counts only while a finding stands on it (not dropped).
    reported = work.reported & {f.path for f in findings}
    withhold = injected or trust.approval_withheld(
        skipped=skipped, given=work.given, confirmed=work.confirmed, reported=reported
    )
    if withhold is not None and verdict is Verdict.APPROVE:
        verdict = Verdict.COMMENT
    all_notes = [*base.notes, *notes, *extra]
    return ReviewResult(
        verdict=verdict,
        summary=summarise(
            findings,
            changed=len(context.files),
            analysed=base.analysed,
            skipped=base.skipped,
            notes=all_notes,
        ),
        findings=tuple(findings),
        skipped=base.skipped,
        analysed=base.analysed,
        notes=tuple(all_notes),
        withhold_approval=withhold,
        withheld_holds_block=injected is not None
        or trust.holds_block(skipped=skipped, given=work.given, confirmed=work.confirmed, reported=reported),
        incomplete=incomplete,
        suppressed=base.suppressed,
        model_skipped=tuple(work.not_reviewed),
        usage=usage,
        prompt_lines=frozenset(work.shown),
    )


def _work_notes(
    work: ModelWork, *, model: str, over_cap: int, cap: int, merged: int, dropped: int
) -> list[str]:
    """The summary's notes on what the model did, and what of it is not shown."""
    extra: list[str] = []
    if work.reviewed:
        cached = f", {work.cached} from cache" if work.cached else ""
        extra.append(
            f"the model ({model}) reviewed {work.reviewed} file{'s' if work.reviewed != 1 else ''}{cached}"
        )
    if over_cap > 0:
        extra.append(f"{over_cap} more model findings not shown (review.llm.max_findings: {cap})")
    if merged:
        extra.append(f"{merged} model finding{'s' if merged != 1 else ''} merged into built-in ones")
    if dropped:
        extra.append(f"{dropped} model finding{'s' if dropped != 1 else ''} dropped by the checks")
    if work.not_reviewed:
        extra.append(
            f"{len(work.not_reviewed)} file{'s' if len(work.not_reviewed) != 1 else ''} "
            "not reviewed by the model (listed below)"
        )
    if work.related_cut:
        extra.append(
            f"{work.related_cut} related definition{'s' if work.related_cut != 1 else ''} or call "
            "sites not shown to the model (LLM_MAX_INPUT_TOKENS)"
        )
    return extra
