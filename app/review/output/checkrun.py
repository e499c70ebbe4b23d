"""The review's check run (``revbot review``): its conclusion, title, summary and annotations,
from the result and the plan ``render`` made. Pure."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..analyzers.injection import PR_BODY_PATH
from ..analyzers.secrets import redact_secrets
from ..core.model import ReviewResult, Severity
from ..engine.inert import neutralise
from .comments import most_severe_first
from .render import MAX_CHECK_TEXT, ReviewPlan

__all__ = ["ANNOTATION_LEVEL", "check_annotations", "check_conclusion", "check_summary", "check_title"]

ANNOTATION_LEVEL = {Severity.BLOCKER: "failure", Severity.CONCERN: "warning", Severity.NIT: "notice"}


def check_conclusion(result: ReviewResult, *, blockers_unconfirmed: bool = False) -> str:
    """Blockers fail. An analysis the pull request made incomplete never passes a required check
    (GitHub passes ``neutral`` and ``skipped``): ``action_required``, or ``failure`` while an
    earlier blocker stands unconfirmed (``blockers_unconfirmed``: its file could not be judged).
    Concerns are neutral; else success."""
    severities = {f.severity for f in result.findings}
    if Severity.BLOCKER in severities:
        return "failure"
    if result.incomplete:
        return "failure" if blockers_unconfirmed else "action_required"
    if Severity.CONCERN in severities:
        return "neutral"
    return "success"


def check_title(result: ReviewResult) -> str:
    withdrawn = [
        f"{len(found)} {why}"
        for found, why in ((result.overruled, "overruled"), (result.learned, "learned"))
        if found
    ]
    suffix = f" ({', '.join(withdrawn)})" if withdrawn else ""
    if not result.findings:
        return (
            f"{'Not fully analysed; no problems found' if result.incomplete else 'No problems found'}{suffix}"
        )
    counts = Counter(f.severity for f in result.findings)
    parts = [
        f"{counts[s]} {s.label}{'s' if counts[s] != 1 else ''}"
        for s in sorted(Severity, reverse=True)
        if counts[s]
    ]
    return ", ".join(parts) + suffix


def check_summary(plan: ReviewPlan) -> str:
    """The review body without its hidden markers, capped to what the Checks API accepts."""
    visible = "\n".join(line for line in plan.body.splitlines() if not line.startswith("<!-- "))
    return visible[:MAX_CHECK_TEXT]


def check_annotations(result: ReviewResult) -> list[dict[str, Any]]:
    out = []
    for finding in most_severe_first(result.findings):
        if finding.path == PR_BODY_PATH:
            continue  # not a file: annotations need one
        start = finding.start_line if finding.start_line is not None else finding.line
        out.append(
            {
                "path": finding.path,
                "start_line": start,
                "end_line": finding.line,
                "annotation_level": ANNOTATION_LEVEL[finding.severity],
                "title": neutralise(redact_secrets(finding.rule)),
                "message": neutralise(redact_secrets(finding.message)),
            }
        )
    return out
