"""Terminal output of a review (``python -m app review``): readable text or JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..core.doclinks import postable_docs
from ..core.model import ReviewResult
from .render import ReviewPlan


def as_json(
    result: ReviewResult | None, *, head_sha: str | None, review: ReviewPlan | None, said: Sequence[str] = ()
) -> str:
    """The analysis and the review the bot would post: ``event``, ``body`` and ``comments`` are
    exactly its ``POST /pulls/{n}/reviews`` (null when it would post none; ``said`` says why)."""
    data: dict[str, Any] = {
        "event": review.event if review else None,
        "body": review.body if review else None,
        "comments": list(review.comments) if review else [],
        "said": list(said),
    }
    if result is None:
        return json.dumps(data, indent=2)
    data |= {
        "verdict": result.verdict.value,
        "head_sha": head_sha,
        "summary": result.summary,
        "findings": [
            {
                "path": f.path,
                "line": f.line,
                "start_line": f.start_line,
                "severity": f.severity.label,
                "rule": f.rule,
                "message": f.message,
                "docs": f.docs if postable_docs(f.docs) else None,  # the page the review links
            }
            for f in sorted(result.findings, key=lambda f: (f.path, f.line, f.rule))
        ],
        "skipped": [{"path": s.path, "reason": s.reason} for s in result.skipped],
        "notes": list(result.notes),  # what limited the review (also in the summary)
    }
    return json.dumps(data, indent=2)


def as_text(result: ReviewResult, *, label: str, head_sha: str) -> str:
    lines = [f"{label} at {head_sha[:12]}: {result.verdict.value}", result.summary]
    if result.findings:
        lines.append("")
        width = max(len(f"{f.path}:{f.line}") for f in result.findings)
        for f in sorted(result.findings, key=lambda f: (f.path, f.line, f.rule)):
            docs = f" ({f.docs})" if postable_docs(f.docs) else ""
            where = f"{f.path}:{f.line}"
            lines.append(f"  {where:<{width}}  {f.severity.label:<7}  {f.rule}  {f.message}{docs}")
    if result.skipped:
        lines += ["", "Not analysed:"]
        lines += [f"  {s.path}: {s.reason}" for s in result.skipped]
    return "\n".join(lines)
