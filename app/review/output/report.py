"""Terminal output of a review (``python -m app review``): readable text or JSON."""

from __future__ import annotations

import json
from typing import Any

from ..core.model import ReviewResult


def as_json(result: ReviewResult, *, head_sha: str, event: str | None = None) -> str:
    data: dict[str, Any] = {
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
            }
            for f in sorted(result.findings, key=lambda f: (f.path, f.line, f.rule))
        ],
        "skipped": [{"path": s.path, "reason": s.reason} for s in result.skipped],
        "notes": list(result.notes),  # what limited the review (also in the summary)
    }
    if event is not None:
        data["event"] = event
    return json.dumps(data, indent=2)


def as_text(result: ReviewResult, *, label: str, head_sha: str) -> str:
    lines = [f"{label} at {head_sha[:12]}: {result.verdict.value}", result.summary]
    if result.findings:
        lines.append("")
        width = max(len(f"{f.path}:{f.line}") for f in result.findings)
        for f in sorted(result.findings, key=lambda f: (f.path, f.line, f.rule)):
            lines.append(f"  {f'{f.path}:{f.line}':<{width}}  {f.severity.label:<7}  {f.rule}  {f.message}")
    if result.skipped:
        lines += ["", "Not analysed:"]
        lines += [f"  {s.path}: {s.reason}" for s in result.skipped]
    return "\n".join(lines)
