"""One inline comment of a review: where GitHub accepts it, and its body (the finding, its
suggestion, its marker). Pure.

GitHub accepts an inline comment only on a RIGHT-side line inside a hunk of the PR's diff
(``anchor`` says where, from the commentable lines). A suggestion is code GitHub applies with one
click, so it cannot be altered to defuse it: one that would quote a secret or open an HTML
comment is withheld instead (``postable_suggestion``; the finding is still posted).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..analyzers.secrets import redact_secrets
from ..core.model import Finding
from ..engine.inert import code, defuse, docs_link, escape
from ..rounds.markers import FindingMarker, problem_key

__all__ = [
    "MAX_HELD",
    "MAX_LISTED",
    "anchor",
    "comment_body",
    "finding_marker",
    "group_key",
    "location",
    "most_severe_first",
    "postable_suggestion",
    "said",
]


MAX_LISTED = 8  # places named in a comment that holds the same finding several times
# Findings one comment holds (each with its marker, ~300 characters): far below GitHub's 65,536
# characters a comment body, however many times one problem is found (up to 500 a review).
MAX_HELD = 40


def anchor(finding: Finding, commentable: frozenset[int]) -> dict[str, Any] | None:
    if not finding.inline or finding.line not in commentable:
        return None
    comment: dict[str, Any] = {"path": finding.path, "line": finding.line, "side": "RIGHT"}
    start = finding.start_line
    if start is not None and start < finding.line:
        if all(n in commentable for n in range(start, finding.line + 1)):
            comment.update(start_line=start, start_side="RIGHT")
        elif finding.suggestion is not None:
            return None  # a multi-line suggestion cannot be shortened safely
    return comment


def postable_suggestion(suggestion: str) -> bool:
    """Whether a suggested replacement may be posted as it is: it quotes no secret and can
    neither open nor close an HTML comment (a suggestion is applied verbatim, so it is never
    altered to make it safe)."""
    return redact_secrets(suggestion) == suggestion and defuse(suggestion) == suggestion


def _suggestion_block(suggestion: str) -> str:
    fence = "```"
    while fence in suggestion:
        fence += "`"
    text = suggestion if suggestion.endswith("\n") or not suggestion else suggestion + "\n"
    return f"{fence}suggestion\n{text}{fence}"


def finding_marker(finding: Finding, head_sha: str) -> str:
    return FindingMarker(
        head_sha=head_sha,
        rule=finding.rule,
        fingerprint=finding.fingerprint,
        path=finding.path,
        line=finding.line,
        severity=finding.severity.label,
        key=problem_key(finding.rule, finding.path, finding.problem),
        content=finding.content,
    ).encode()


def said(finding: Finding) -> str:
    """What a finding says, as posted: its message inert, its rule's documentation linked."""
    return escape(finding.message) + docs_link(finding.docs)


def comment_body(finding: Finding, head_sha: str, *, with_: Sequence[Finding] = ()) -> str:
    """One inline comment: ``finding``, and ``with_``, the findings it also holds (others on its
    line, and the same problem elsewhere: ``group_key``), each with its marker, so the thread is
    resolved only once every one of them is fixed. The leading finding's marker comes last (the
    one ``FindingMarker.read`` takes: what a dispute in the thread is about)."""
    lines = [f"**{finding.severity.label}** · {code(finding.rule)} · {said(finding)}"]
    here = [f for f in with_ if (f.path, f.line) == (finding.path, finding.line)]
    elsewhere = [f for f in with_ if f not in here]
    lines += [f"**{f.severity.label}** · {code(f.rule)} · {said(f)}" for f in here]
    if elsewhere:
        shown = ", ".join(location(f) for f in elsewhere[:MAX_LISTED])
        more = f" and {len(elsewhere) - MAX_LISTED} more" if len(elsewhere) > MAX_LISTED else ""
        lines += ["", f"The same at {shown}{more}."]
    suggestion = finding.suggestion if not here else None  # one click fixes one finding, not a line's all
    if suggestion is not None and postable_suggestion(suggestion):
        lines += ["", _suggestion_block(suggestion)]
    elif suggestion is not None:
        lines += ["", "_A suggested fix is withheld: it would quote a secret or an HTML comment._"]
    lines += ["", *(finding_marker(f, head_sha) for f in with_), finding_marker(finding, head_sha)]
    return "\n".join(lines)


def group_key(finding: Finding) -> tuple[str, str, str, str]:
    """What makes findings the same problem, said once (``render._place``): the rule, the message
    and what was flagged where the message does not say it."""
    return (finding.rule, finding.message, finding.evidence, finding.severity.label)


def location(finding: Finding) -> str:
    if finding.start_line is not None and finding.start_line < finding.line:
        return code(f"{finding.path}:{finding.start_line}-{finding.line}")
    return code(f"{finding.path}:{finding.line}")


def most_severe_first(findings: tuple[Finding, ...]) -> list[Finding]:
    return sorted(findings, key=lambda f: (-f.severity, f.path, f.line, f.rule))
