"""From a ``ReviewResult`` to what GitHub is sent: one review (event, body, inline comments) and a
check run's conclusion and annotations. Pure: no I/O.

Anchoring: GitHub accepts an inline comment only on a RIGHT-side line inside a hunk of the PR's
diff (otherwise the whole review is refused with 422), so every comment is checked against the
commentable lines first (``comments``, which also writes each comment); a finding anywhere else
is listed in the review body. At most ``max_comments`` findings are inline, the most severe
first; the rest go to the body too. The repository's noise budget (``Policy.inline_min_severity``,
``Policy.max_nits``) keeps minor findings out of the inline comments: they are a short collapsed
list in the body.

Everything the PR controls (paths, messages quoting code, the model's words) passes ``inert``'s
``code`` or ``escape`` before it reaches Markdown, so it can neither quote a secret, break the
layout, ping anyone, show a live link nor forge a hidden marker (a suggestion, which cannot be
altered, is withheld instead: ``comments``).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.model import MODEL_RULES, Finding, ReviewResult, Severity, Verdict
from ..engine.inert import code, escape
from ..rounds.identity import Delta, Recorded, Renames, held, in_delta
from ..rounds.markers import FindingMarker, ReviewMarker, Trigger
from ..rounds.overrule import Overrule
from .comments import (
    MAX_HELD,
    anchor,
    comment_body,
    finding_marker,
    group_key,
    location,
    most_severe_first,
    said,
)

HEADLINE = {
    Verdict.REQUEST_CHANGES: "changes requested",
    Verdict.COMMENT: "comments",
    Verdict.APPROVE: "approved",
}
MAX_CHECK_TEXT = 60_000
API_RULES = "api/"  # the public API checks (``analyzers.api``): listed under their own heading
INCOMPLETE = "not everything was analysed (the files listed under Not analysed, and the notes above)"


@dataclass(frozen=True, slots=True)
class Policy:
    approve: bool  # REVIEW_APPROVE / repo ``review.approve``
    pr_by_bot: bool  # never approve or block a PR the bot itself opened
    max_comments: int = 30
    # The noise budget (``review.inline_min_severity``, ``review.max_nits``): findings below the
    # severity, and nits beyond the number, are listed in the body, not commented inline.
    inline_min_severity: Severity = Severity.NIT
    max_nits: int = 5


class Dismissal(enum.StrEnum):
    """What happened to the bot's earlier request for changes when approval is disabled."""

    DISMISSED = "dismissed"
    FORBIDDEN = "forbidden"  # GitHub answered 403: the installation may not dismiss reviews here


@dataclass(frozen=True, slots=True)
class Rereview:
    """The bot's latest decision on this PR was a request for changes: this review must re-decide.

    ``fixed`` and ``still_open`` are the earlier review's blockers (read back from its markers)
    that are gone from, or still in, the current findings. ``dismissal`` is what happened to the
    earlier block when approval is disabled.
    ``overruled``: the earlier blockers someone who may has withdrawn on this PR. ``unconfirmed``:
    blockers no longer reported on a file this analysis could not (fully) look at.
    """

    prior_head_sha: str
    fixed: tuple[FindingMarker, ...] = ()
    still_open: tuple[FindingMarker, ...] = ()
    dismissal: Dismissal | None = None
    overruled: tuple[Overrule, ...] = ()
    unconfirmed: tuple[FindingMarker, ...] = ()  # gone from the findings, but their file was not analysed


@dataclass(frozen=True, slots=True)
class ReviewPlan:
    event: Verdict  # the GitHub review event: the verdict after the policy (``review_event``)
    body: str
    comments: tuple[dict[str, Any], ...]
    inline: tuple[Finding, ...]
    in_body: tuple[Finding, ...]
    in_threads: tuple[Finding, ...] = ()  # already carried by an open thread of the bot
    unchanged: tuple[Finding, ...] = ()  # on lines not changed since the last reviewed head
    quieted: tuple[Finding, ...] = ()  # of ``in_body``: commentable, but over the noise budget
    grouped: tuple[Finding, ...] = ()  # held by the comment of another (``Placement.grouped``)

    def payload(self, head_sha: str) -> dict[str, Any]:
        """The JSON body of ``POST /repos/{o}/{r}/pulls/{n}/reviews``."""
        data: dict[str, Any] = {"commit_id": head_sha, "body": self.body, "event": self.event}
        if self.comments:
            data["comments"] = list(self.comments)
        return data


def review_event(
    verdict: Verdict, policy: Policy, *, rereview: bool = False, withhold_approval: bool = False
) -> Verdict:
    """The GitHub review event for a verdict under the deployment's policy.

    A re-review never ends in a plain comment while it could decide: GitHub's request for changes
    is sticky, so it is either asserted again (blockers remain) or cleared by an approval (or,
    with approval disabled, by dismissing it; the review itself is then a comment).
    ``withhold_approval`` (text addressed to an AI reviewer, read by the model, or an incomplete
    analysis) turns an approval into a comment, on a re-review too: the sticky block then stays.
    """
    if rereview and verdict is not Verdict.REQUEST_CHANGES:
        verdict = Verdict.APPROVE
    if verdict is Verdict.APPROVE:
        allowed = policy.approve and not policy.pr_by_bot and not withhold_approval
        return Verdict.APPROVE if allowed else Verdict.COMMENT
    if verdict is Verdict.REQUEST_CHANGES and policy.pr_by_bot:
        return Verdict.COMMENT
    return verdict


def plan_review(
    result: ReviewResult,
    *,
    head_sha: str,
    commentable: Mapping[str, frozenset[int]],
    policy: Policy,
    trigger: Trigger,
    bot_name: str,
    rereview: Rereview | None = None,
    issued_at: float = 0.0,
    changed: Mapping[str, frozenset[int]] | None = None,
    threads: Sequence[Recorded] = (),
    renames: Renames | None = None,
    delta: Delta | None = None,
) -> ReviewPlan:
    """Decide the event, which findings are inline, and write the body. ``changed``: the lines
    the PR added or changed, where alone a language model's finding may be inline (on an
    unchanged line it goes to the body, like one outside the diff). ``threads``: the findings
    of the bot's open threads, never posted again (``identity.held``, through ``renames``).
    ``delta``: a re-review comments inline only on lines changed since the last reviewed head;
    the rest is listed in the body (and counts in the verdict all the same)."""
    event = review_event(
        result.verdict,
        policy,
        rereview=rereview is not None,
        withhold_approval=result.withhold_approval is not None or result.incomplete,
    )
    held_by = _carried(result, threads, renames)
    placed = _place(
        result, head_sha, policy, commentable=commentable, changed=changed, held_by=held_by, delta=delta
    )
    body = render_body(
        result,
        placed,
        event,
        policy,
        rereview,
        head_sha=head_sha,
        trigger=trigger,
        bot_name=bot_name,
        issued_at=issued_at,
        scope_note=delta.note if delta is not None else None,
    )
    return ReviewPlan(
        event=event,
        body=body,
        comments=tuple(placed.comments),
        inline=tuple(placed.inline),
        in_body=tuple(placed.in_body),
        in_threads=tuple(placed.in_threads),
        unchanged=tuple(placed.unchanged),
        quieted=tuple(placed.quieted),
        grouped=tuple(f for group in placed.grouped.values() for f in group),
    )


@dataclass(slots=True)
class Placement:
    """Where each finding of a review goes (``ReviewPlan`` has the same lists, frozen)."""

    inline: list[Finding] = field(default_factory=list)
    comments: list[dict[str, Any]] = field(default_factory=list)  # the inline ones, anchored
    in_body: list[Finding] = field(default_factory=list)
    in_threads: list[Finding] = field(default_factory=list)
    unchanged: list[Finding] = field(default_factory=list)
    quieted: list[Finding] = field(default_factory=list)
    # Held by another finding's comment: on its line, or the same problem elsewhere (one comment
    # says it once and lists where), by the index of that comment in ``comments``.
    grouped: dict[int, list[Finding]] = field(default_factory=dict)

    def joins(self, finding: Finding) -> int | None:
        """The comment ``finding`` belongs in: one on its line, else one on the same problem. A
        model's findings are judged by the model, thread by thread: never grouped. A comment
        holds at most ``MAX_HELD`` findings; past that, the next one leads a comment of its own."""
        if finding.rule.startswith(MODEL_RULES):
            return None
        leads = [
            (i, lead)
            for i, lead in enumerate(self.inline)
            if not lead.rule.startswith(MODEL_RULES) and len(self.grouped.get(i, ())) < MAX_HELD - 1
        ]
        for index, lead in leads:
            if (lead.path, lead.line) == (finding.path, finding.line):
                return index
        for index, lead in leads:
            if group_key(lead) == group_key(finding):
                return index
        return None


def _carried(result: ReviewResult, threads: Sequence[Recorded], renames: Renames | None) -> set[int]:
    """The findings (by ``id``) an open thread of the bot already holds (``identity.held``)."""
    commentable_kind = [f for f in most_severe_first(result.findings) if f.inline]
    holds = held(commentable_kind, threads, renames or {})
    return {id(f) for f, taken in zip(commentable_kind, holds, strict=True) if taken}


def _place(
    result: ReviewResult,
    head_sha: str,
    policy: Policy,
    *,
    commentable: Mapping[str, frozenset[int]],
    changed: Mapping[str, frozenset[int]] | None,
    held_by: set[int],
    delta: Delta | None,
) -> Placement:
    placed = Placement()
    for finding in most_severe_first(result.findings):
        if id(finding) in held_by:
            placed.in_threads.append(finding)
            continue
        lines = commentable.get(finding.path, frozenset())
        if changed is not None and finding.rule.startswith(MODEL_RULES):
            lines = lines & changed.get(finding.path, frozenset())
        where = anchor(finding, lines)
        joined = placed.joins(finding) if where is not None and may_join(finding, policy) else None
        if where is not None and delta is not None and not in_delta(finding, delta):
            placed.unchanged.append(finding)
        elif joined is not None:
            placed.grouped.setdefault(joined, []).append(finding)
        elif where is not None and over_budget(finding, placed.inline, policy):
            placed.quieted.append(finding)
            placed.in_body.append(finding)
        elif where is not None and len(placed.inline) < policy.max_comments:
            placed.comments.append(where)
            placed.inline.append(finding)
        else:
            placed.in_body.append(finding)
    for index, (where, lead) in enumerate(zip(placed.comments, placed.inline, strict=True)):
        where["body"] = comment_body(lead, head_sha, with_=placed.grouped.get(index, ()))
    return placed


def over_budget(finding: Finding, inline: Sequence[Finding], policy: Policy) -> bool:
    """Whether a commentable finding stays out of the inline comments: it is below the
    repository's ``inline_min_severity``, or a nit after ``max_nits`` nits are inline already
    (findings come most severe first, so the budget never pushes out a concern)."""
    if finding.severity < policy.inline_min_severity:
        return True
    nits = sum(1 for f in inline if f.severity is Severity.NIT)
    return finding.severity is Severity.NIT and nits >= policy.max_nits


def may_join(finding: Finding, policy: Policy) -> bool:
    """Whether a finding may be held by another's comment: only where the repository lets findings
    of its severity be inline at all (below ``inline_min_severity``, or a nit with ``max_nits: 0``,
    it is listed in the body). Held, it takes no inline slot and no nit of the budget."""
    if finding.severity < policy.inline_min_severity:
        return False
    return finding.severity is not Severity.NIT or policy.max_nits > 0


def severity_table(findings: tuple[Finding, ...] | list[Finding]) -> list[str]:
    counts = Counter(f.severity for f in findings)
    rows = ["| severity | findings |", "| --- | --- |"]
    rows += [
        f"| {severity.label} | {counts.get(severity, 0)} |" for severity in sorted(Severity, reverse=True)
    ]
    return rows


def render_body(
    result: ReviewResult,
    placed: Placement,
    event: Verdict,
    policy: Policy,
    rereview: Rereview | None = None,
    *,
    head_sha: str,
    trigger: Trigger,
    bot_name: str,
    issued_at: float = 0.0,
    scope_note: str | None = None,
) -> str:
    inline, in_body, in_threads = placed.inline, placed.in_body, placed.in_threads
    unchanged, quieted = placed.unchanged, placed.quieted
    lines = [f"### {escape(bot_name)}: {HEADLINE[event]}", "", escape(result.summary)]
    if scope_note is not None:
        lines += ["", scope_note]
    if result.findings:
        lines += ["", *severity_table(result.findings)]
    if rereview is not None:
        lines += ["", *_rereview_lines(rereview, event=event, head_sha=head_sha)]
    lines += _policy_lines(result, event=event, rereview=rereview, policy=policy)
    if in_threads:
        lines += ["", "**Still open** (discussed in the existing threads):"]
        lines += [_finding_line(f) for f in in_threads]
    if unchanged:
        lines += ["", "**On lines unchanged since my last review** (not commented inline again):"]
        lines += [_finding_line(f) for f in unchanged]
    budget = set(quieted)
    listed = [f for f in in_body if f.inline and f not in budget]
    summarised = [f for f in in_body if not f.inline]
    if quieted:
        lines += _quieted_lines(quieted, policy)
    if listed:
        why = "outside the diff or over the limit of inline comments" if inline else "outside the diff"
        lines += ["", f"**Findings not commented inline** ({why}):"]
        lines += [_finding_line(f) for f in listed]
    api = [f for f in summarised if f.rule.startswith(API_RULES)]
    if api:  # what callers see is never filed beside trailing whitespace
        lines += ["", "**Public API changes**:"]
        lines += [f"- **{f.severity.label}** {code(f.path)}: {said(f)}" for f in api]
    housekeeping = [f for f in summarised if not f.rule.startswith(API_RULES)]
    if housekeeping:
        lines += ["", "**Housekeeping** (summarised):"]
        lines += [f"- {code(f.rule)} {code(f.path)}: {said(f)}" for f in housekeeping]
    if result.skipped:
        lines += [
            "",
            f"**Not analysed** ({len(result.skipped)} file{'s' if len(result.skipped) != 1 else ''}):",
        ]
        lines += [f"- {code(s.path)}: {escape(s.reason)}" for s in result.skipped]
    lines += _suppressed_lines(result.suppressed)
    lines += _model_lines(result)
    marker = ReviewMarker(
        head_sha=head_sha, trigger=trigger, verdict=event, findings=len(result.findings), issued_at=issued_at
    )
    lines += ["", f"<sub>Reviewed at {head_sha[:12]}.</sub>", marker.encode()]
    # Every finding this review lists carries its marker (a later re-review reads them back).
    lines += [finding_marker(f, head_sha) for f in (*in_body, *unchanged, *in_threads)]
    return "\n".join(lines)


def _policy_lines(
    result: ReviewResult, *, event: Verdict, rereview: Rereview | None, policy: Policy
) -> list[str]:
    """Why the event is not the verdict: an approval withheld (by the analysis or the policy), or
    a block not asserted on the bot's own pull request."""
    lines: list[str] = []
    if (
        result.withhold_approval is not None
        and event is Verdict.COMMENT
        and result.verdict is not (Verdict.REQUEST_CHANGES)
    ):
        stands = (
            " My earlier request for changes stands until a maintainer dismisses it."
            if rereview and result.holds_block
            else ""
        )
        lines += ["", f"**Not approving:** {escape(result.withhold_approval)}.{stands}"]
    elif result.incomplete and event is Verdict.COMMENT and result.verdict is not Verdict.REQUEST_CHANGES:
        stands = (
            " My earlier request for changes stands until a review can confirm the fixes." if rereview else ""
        )
        lines += ["", f"**Not approving:** {INCOMPLETE}.{stands}"]
    elif rereview is None and result.verdict is Verdict.APPROVE and event is Verdict.COMMENT:
        reason = (
            "this pull request was opened by the bot itself" if policy.pr_by_bot else "approval is disabled"
        )
        lines += ["", f"No problems found; not approving because {reason}."]
    if result.verdict is Verdict.REQUEST_CHANGES and event is Verdict.COMMENT:
        lines += ["", "Blockers found; not requesting changes on a pull request the bot opened itself."]
    return lines


def _finding_line(finding: Finding) -> str:
    return f"- **{finding.severity.label}** {code(finding.rule)} {location(finding)}: {said(finding)}"


def _quieted_lines(quieted: list[Finding], policy: Policy) -> list[str]:
    """The findings the noise budget kept out of the inline comments: one short line each,
    collapsed (they are minor by the repository's own settings)."""
    reasons = []
    if any(f.severity < policy.inline_min_severity for f in quieted):
        reasons.append(f"below {policy.inline_min_severity.label}")
    if any(f.severity >= policy.inline_min_severity for f in quieted):
        reasons.append(
            f"over the budget of {policy.max_nits} inline nit{'s' if policy.max_nits != 1 else ''}"
        )
    why = "; ".join(reasons)
    count = len(quieted)
    lines = ["", f"<details><summary>{count} minor finding{'s' if count != 1 else ''} ({why})</summary>", ""]
    lines += [_finding_line(f) for f in quieted]
    return [*lines, "", "</details>"]


def _suppressed_lines(suppressed: Sequence[Finding]) -> list[str]:
    """Concerns and nits that only this pull request's own suppressions hide: they stay
    suppressed (the repository's convention allows it), and are listed, collapsed."""
    if not suppressed:
        return []
    count = len(suppressed)
    summary = f"{count} finding{'s' if count != 1 else ''} suppressed by this pull request's own comments"
    lines = ["", f"<details><summary>{summary}</summary>", ""]
    lines += [_finding_line(f) for f in suppressed]
    return [*lines, "", "</details>"]


def _model_lines(result: ReviewResult) -> list[str]:
    """What the language-model reviewer adds: the files it did not review, and its usage
    (collapsed: it matters to whoever pays, not to the author)."""
    lines: list[str] = []
    if result.model_skipped:
        count = len(result.model_skipped)
        lines += ["", f"**Not reviewed by the model** ({count} file{'s' if count != 1 else ''}):"]
        lines += [f"- {code(s.path)}: {escape(s.reason)}" for s in result.model_skipped]
    if result.usage:
        lines += ["", "<details><summary>Model usage</summary>", ""]
        lines += [f"- {escape(line)}" for line in result.usage]
        lines += ["", "</details>"]
    return lines


def _marker_line(marker: FindingMarker) -> str:
    return f"- {code(marker.rule)} {code(f'{marker.path}:{marker.line}')}"


def _rereview_lines(rereview: Rereview, *, event: Verdict, head_sha: str) -> list[str]:
    short = head_sha[:12]
    lines = [f"Re-review: I requested changes at {rereview.prior_head_sha[:12]}; this is {short}."]
    if rereview.fixed:
        lines += ["", f"**Verified fixed** at {short}:", *(_marker_line(m) for m in rereview.fixed)]
    if rereview.overruled:
        lines += ["", "**Overruled** on this pull request:", *_overrule_lines(rereview.overruled)]
    if rereview.still_open:
        lines += [
            "",
            f"**Blockers still present** at {short}:",
            *(_marker_line(m) for m in rereview.still_open),
        ]
    if rereview.unconfirmed:
        lines += [
            "",
            f"**Not confirmed fixed** at {short} (their files were not fully analysed):",
            *(_marker_line(m) for m in rereview.unconfirmed),
        ]
    if event is Verdict.APPROVE:
        lines += ["", "No blockers remain, so this approval replaces my request for changes."]
    elif event is Verdict.COMMENT and rereview.dismissal is Dismissal.DISMISSED:
        lines += ["", "No blockers remain: I dismissed my request for changes (approval is disabled here)."]
    elif event is Verdict.COMMENT and rereview.dismissal is Dismissal.FORBIDDEN:
        lines += [
            "",
            "**My earlier request for changes still stands.** No blockers remain at "
            f"{short}, but I am not allowed to dismiss reviews on this branch, and approval is disabled. "
            "A maintainer needs to dismiss my earlier review to unblock this pull request.",
        ]
    return lines


def _overrule_lines(overruled: Sequence[Overrule]) -> list[str]:
    return [f"- {code(o.rule)} {code(f'{o.path}:{o.line}')} by {code(o.by)}" for o in overruled]


RECOUNT_HEADING = "**Overruled since this review**:"


def recounted_summary(summary: str, overruled: Sequence[Overrule]) -> str:
    """A check run's summary after findings were overruled without a new review: what the review
    said, then what was overruled since (replacing the list an earlier recount added)."""
    said = summary.split(f"\n\n{RECOUNT_HEADING}", 1)[0]
    if not overruled:
        return said
    return "\n".join([said, "", RECOUNT_HEADING, *_overrule_lines(overruled)])[:MAX_CHECK_TEXT]
