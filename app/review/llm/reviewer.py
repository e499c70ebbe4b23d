"""The language-model reviewer (``REVIEWER=llm``): the built-in reviewer, plus a model.

1. The built-in review runs first and always; its findings are never dropped and are given to
   the model as facts. Repository skip rules (drafts, title keywords, labels, authors) and the
   installation's daily token budget may stop the model, never the built-in review: the summary
   says why.
2. Each analysed file (minus ``review.llm.skip.paths``) becomes a section (``prompt``); a file
   whose answer is cached under (blob sha, its diff, prompt version, model; plus the replies in
   the bot's threads on that file, which the model must hear) costs nothing.
3. The other sections are packed into requests under ``LLM_MAX_INPUT_TOKENS`` (the provider's
   tokenizer when its SDK has one, else bytes/4), planned in order against
   ``LLM_MAX_TOKENS_PER_REVIEW`` (input plus the output allowance, so the cap holds), and sent
   ``LLM_CONCURRENCY`` at a time. An invalid answer gets one repair request, then its files are
   named as not reviewed.
4. Every model finding is checked mechanically: a file of its request, a line of that file, a
   known category, a capped message with secrets redacted and mentions defused. Severities are
   capped at concern unless ``review.llm.blockers``; one on the line of a built-in finding merges
   into it; the ``review.llm.max_findings`` most important are kept.
5. The verdict comes from severities exactly as for the built-in reviewer; a PR holding text
   addressed to an AI reviewer is never approved once the model has read it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import ValidationError

from ..analyzers import finding as make_finding
from ..analyzers.injection import RULE as INJECTION_RULE
from ..analyzers.secrets import redact_secrets
from ..diff import PatchLines, parse_patch
from ..engine import BuiltinReviewer, deduplicate, summarise, verdict_for
from ..model import ChangedFile, FileContent, Finding, PullContext, ReviewResult, Severity, Skipped, Verdict
from ..selection import matching_pattern
from . import prompt, related
from .memory import InMemory, Memory
from .providers import Completion, Provider, ProviderError, estimate_tokens
from .schema import (
    CATEGORIES,
    FINDINGS_SCHEMA,
    THREAD_SCHEMA,
    ModelAnswer,
    ModelFinding,
    OutputSchema,
    ThreadAnswer,
    extract_json,
    problems,
)

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 600
MAX_SUGGESTION_LINES = 50
SEVERITY = {"blocker": Severity.BLOCKER, "concern": Severity.CONCERN, "nit": Severity.NIT}
_MENTION = re.compile(r"(?<![\w`])@(?=[A-Za-z0-9])")
_CODE_SPAN = re.compile(r"(`+).+?\1", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Limits:
    max_input_tokens: int = 24_000
    max_output_tokens: int = 4_096
    concurrency: int = 4
    max_tokens_per_review: int = 200_000
    daily_token_budget: int = 0  # 0: no cap
    price_input_per_mtok: float = 0.0
    price_output_per_mtok: float = 0.0


@dataclass(slots=True)
class Section:
    file: ChangedFile
    text: str
    tokens: int
    key: str  # cache key
    shown: frozenset[tuple[str, int]] = frozenset()  # (path, head line) the section shows


@dataclass(slots=True)
class Group:
    sections: list[Section]
    tokens: int = 0

    @property
    def paths(self) -> list[str]:
        return [s.file.path for s in self.sections]


@dataclass(slots=True)
class Outcome:
    """What one review's model work produced."""

    findings: list[ModelFinding] = field(default_factory=list)
    paths: dict[int, str] = field(default_factory=dict)  # id(finding) -> path it belongs to
    not_reviewed: list[Skipped] = field(default_factory=list)
    reviewed: int = 0
    outside: int = 0  # findings on a file the request did not show: dropped
    cached: int = 0
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    today: str = ""  # the installation's usage today, for the footer
    line_counts: dict[str, int] = field(default_factory=dict)  # path -> lines at head, when read
    related_cut: int = 0  # related definitions and call sites left out of the prompts (budget)
    shown: set[tuple[str, int]] = field(default_factory=set)  # what the model reviewed was shown


def cache_key(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def skip_reason(context: PullContext) -> str | None:
    """Why the repository's rules say the model does not review this PR, or None."""
    options = context.model
    if options.skip_drafts and context.draft:
        return "the pull request is a draft (review.llm.skip.drafts)"
    title = context.title.casefold()
    for keyword in options.skip_title_keywords:
        if keyword.strip() and keyword.casefold() in title:
            return f"its title contains {keyword!r} (review.llm.skip.title_keywords)"
    labels = {label.casefold() for label in context.labels}
    for label in options.skip_labels:
        if label.casefold() in labels:
            return f"it has the label {label!r} (review.llm.skip.labels)"
    author = (context.author_login or "").casefold()
    if author and author in {a.casefold() for a in options.skip_authors}:
        return f"its author {context.author_login} is in review.llm.skip.authors"
    return None


def defuse_mentions(text: str) -> str:
    """``@name`` outside code spans would ping someone: a zero-width joiner keeps it readable."""
    out: list[str] = []
    position = 0
    for span in _CODE_SPAN.finditer(text):
        out.append(_MENTION.sub("@\u2060", text[position : span.start()]))
        out.append(span.group(0))
        position = span.end()
    out.append(_MENTION.sub("@\u2060", text[position:]))
    return "".join(out)


def clean_message(text: str) -> str:
    flat = " ".join(redact_secrets(text).split())
    if len(flat) > MAX_MESSAGE_CHARS:
        flat = flat[: MAX_MESSAGE_CHARS - 1].rstrip() + "\u2026"
    return defuse_mentions(flat)


class LlmReviewer:
    """Implements ``model.Reviewer``; ``builtin`` is the reviewer whose findings are facts."""

    def __init__(
        self,
        provider: Provider,
        *,
        limits: Limits | None = None,
        memory: Memory | None = None,
        builtin: BuiltinReviewer | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.provider = provider
        self.limits = limits or Limits()
        self.memory: Memory = memory or InMemory()
        self.builtin = builtin or BuiltinReviewer()
        self.clock = clock
        self._gate = asyncio.Semaphore(self.limits.concurrency)
        self.tokens_used = 0  # since this reviewer was made (``eval`` reads it)
        self._last_ok: float | None = None
        self._failing: tuple[float, str] | None = None  # since when, and the error

    def health(self) -> dict[str, object]:
        """For ``/healthz``: whether the provider's last request succeeded."""
        if self._failing is not None:
            since, error = self._failing
            return {"status": "failing", "since": since, "error": error, "model": self.provider.model}
        return {"status": "ok" if self._last_ok else "unused", "model": self.provider.model}

    def _record(self, error: ProviderError | None) -> None:
        if error is None:
            self._last_ok, self._failing = self.clock(), None
        elif self._failing is None:
            self._failing = (self.clock(), str(error))

    async def aclose(self) -> None:
        await self.provider.aclose()

    # ------------------------------------------------------------------------------ review
    async def review(self, context: PullContext) -> ReviewResult:
        base = await self.builtin.review(context)
        reason = skip_reason(context)
        if reason is None:
            reason = await self._over_budget(context.installation_id)
        if reason is not None:
            log.info("model review skipped: %s", reason)
            return self._combine(
                context, base, Outcome(), notes=[f"the model did not review this pull request: {reason}"]
            )
        outcome = Outcome()
        notes: list[str] = []
        sections = await self._sections(context, base, outcome)
        pending = await self._cached(sections, outcome)
        groups = await self._groups(context, pending)
        planned = self._plan(groups, outcome, await self._allowance(context))
        results = await asyncio.gather(*(self._ask(context, group, outcome) for group in planned))
        failures = [note for note in results if note]
        notes += failures
        if outcome.requests:
            await self.memory.spend(
                context.installation_id,
                self.clock(),
                input_tokens=outcome.input_tokens,
                output_tokens=outcome.output_tokens,
                requests=outcome.requests,
            )
        log.info(
            "model review: %d files (%d cached) in %d requests, %d input + %d output tokens, %d not reviewed",
            outcome.reviewed,
            outcome.cached,
            outcome.requests,
            outcome.input_tokens,
            outcome.output_tokens,
            len(outcome.not_reviewed),
        )
        budget = self.limits.daily_token_budget
        if budget and (outcome.requests or outcome.cached):
            used = await self.memory.used_today(context.installation_id, self.clock())
            outcome.today = (
                f"today for this installation: {used:,} of {budget:,} tokens (LLM_DAILY_TOKEN_BUDGET)"
            )
        return self._combine(context, base, outcome, notes=notes)

    async def _over_budget(self, installation_id: int | None) -> str | None:
        budget = self.limits.daily_token_budget
        if not budget:
            return None
        used = await self.memory.used_today(installation_id, self.clock())
        if used >= budget:
            return (
                f"this installation's daily token budget is used up ({used:,} of {budget:,}, "
                "LLM_DAILY_TOKEN_BUDGET)"
            )
        return None

    async def _allowance(self, context: PullContext) -> tuple[int, str]:
        """Tokens this review may use, and the setting that limits it."""
        cap, why = (
            self.limits.max_tokens_per_review,
            "the review's token cap was reached (LLM_MAX_TOKENS_PER_REVIEW)",
        )
        if self.limits.daily_token_budget:
            used = await self.memory.used_today(context.installation_id, self.clock())
            left = max(0, self.limits.daily_token_budget - used)
            if left < cap:
                cap, why = left, "the installation's daily token budget was reached (LLM_DAILY_TOKEN_BUDGET)"
        return cap, why

    async def _sections(self, context: PullContext, base: ReviewResult, outcome: Outcome) -> list[Section]:
        analysed = set(base.analysed)
        files: list[ChangedFile] = []
        for f in context.files:
            if f.path not in analysed or f.patch is None:
                continue
            pattern = matching_pattern(context.model.skip_paths, f.path)
            if pattern is not None:
                outcome.not_reviewed.append(Skipped(f.path, f"review.llm.skip.paths (`{pattern}`)"))
                continue
            files.append(f)
        contents = dict(await context.read([f.path for f in files])) if files else {}
        sources, tree_files = await self._related_sources(context, contents)
        sections: list[Section] = []
        for f in files:
            content = contents.get(f.path)
            text = content.text if content is not None else None
            lines = parse_patch(f.patch)
            prior = [p for p in context.prior if p.path == f.path]
            if text is not None:
                outcome.line_counts[f.path] = len(text.splitlines())
            found = (
                related.related_context(
                    f.path, text, lines.added, sources, tree_files, budget_chars=self._related_budget()
                )
                if text is not None and f.path.endswith(".py")
                else related.Related()
            )
            outcome.related_cut += found.cut
            rendered = prompt.render_file(
                path=f.path,
                status=f.status,
                patch=f.patch or "",
                lines=lines,
                text=text,
                builtin=[x for x in base.findings if x.path == f.path],
                prior=prior,
                related=found.lines,
            )
            key = cache_key(
                "review",
                self.provider.name,
                self.provider.model,
                prompt.PROMPT_VERSION,
                f.path,
                f.blob_sha or hashlib.sha256((text or "").encode()).hexdigest(),
                f.patch or "",
                # Someone answered in a thread on this file: the model must hear it.
                *(reply for p in prior for reply in p.replies),
                *found.lines,  # what the file calls elsewhere may have changed without it
            )
            sections.append(
                Section(
                    file=f,
                    text=rendered,
                    tokens=estimate_tokens(rendered),
                    key=key,
                    shown=frozenset(
                        {(f.path, n) for n in lines.right_lines}
                        | {
                            (f.path, n)
                            for n in (prompt.context_lines(f.path, lines, text)[0] if text else ())
                        }
                        | found.shown
                    ),
                )
            )
        return sections

    def _related_budget(self) -> int:
        """Characters of related context per file: an eighth of a request (about 4 characters a token)."""
        return self.limits.max_input_tokens // 8 * 4

    @staticmethod
    async def _related_sources(
        context: PullContext, contents: Mapping[str, FileContent | None]
    ) -> tuple[related.Sources, frozenset[str]]:
        """The texts related context is found in: the changed Python files, and what they import
        from the repository and the files beside them (one tree read, one batched read)."""
        changed = {p: c.text for p, c in contents.items() if c is not None and c.text and p.endswith(".py")}
        listing = await context.tree() if context.tree is not None and changed else None
        if listing is None:
            return related.Sources(changed), frozenset(changed)
        extra = related.wanted_paths(changed, listing.files)
        read = dict(await context.read(extra)) if extra else {}
        texts = {p: c.text for p, c in read.items() if c is not None and c.text}
        return related.Sources(changed | texts), listing.files

    async def _cached(self, sections: Sequence[Section], outcome: Outcome) -> list[Section]:
        pending: list[Section] = []
        for section in sections:
            stored = await self.memory.answer(section.key)
            if stored is None:
                pending.append(section)
                continue
            try:
                answer = ModelAnswer.model_validate_json(stored)
            except ValidationError:
                pending.append(section)
                continue
            outcome.cached += 1
            outcome.reviewed += 1
            outcome.shown |= section.shown
            self._take(outcome, answer.findings, [section])
        return pending

    def _request(self, context: PullContext, sections: Sequence[Section]) -> prompt.Request:
        return prompt.review_request(
            title=context.title,
            body=context.body,
            instructions=context.model.instructions,
            sections=[s.text for s in sections],
            schema=FINDINGS_SCHEMA,
            max_findings=max(1, context.model.max_findings),
        )

    async def _measure(self, context: PullContext, sections: Sequence[Section]) -> int:
        request = self._request(context, sections)
        counted = await self.provider.count_tokens(
            system=request.system, user=request.user, schema=FINDINGS_SCHEMA
        )
        return counted if counted is not None else estimate_tokens(request.system + request.user)

    async def _groups(self, context: PullContext, sections: Sequence[Section]) -> list[Group]:
        """Greedy packing in the PR's order on estimates; each request then measured (with the
        provider's tokenizer where it has one) and halved while over the limit."""
        if not sections:
            return []
        limit = self.limits.max_input_tokens
        overhead = estimate_tokens(self._request(context, []).system + self._request(context, []).user)
        groups: list[Group] = []
        current: list[Section] = []
        size = overhead
        for section in sections:
            if current and size + section.tokens > limit:
                groups.append(Group(current))
                current, size = [], overhead
            current.append(section)
            size += section.tokens
        groups.append(Group(current))
        measured: list[Group] = []
        while groups:
            group = groups.pop(0)
            try:
                group.tokens = await self._measure(context, group.sections)
            except ProviderError:
                group.tokens = overhead + sum(s.tokens for s in group.sections)
            if group.tokens > limit and len(group.sections) > 1:
                half = len(group.sections) // 2
                groups[:0] = [Group(group.sections[:half]), Group(group.sections[half:])]
                continue
            measured.append(group)
        return measured

    def _plan(self, groups: Sequence[Group], outcome: Outcome, allowance: tuple[int, str]) -> list[Group]:
        """The requests that fit, in order: a request is sent only if its input plus its output
        allowance fits in what is left of the review's cap; the rest are named as not reviewed."""
        planned: list[Group] = []
        left, why = allowance
        for group in groups:
            if len(group.sections) == 1 and group.tokens > self.limits.max_input_tokens:
                outcome.not_reviewed.append(
                    Skipped(group.paths[0], "too large for one model request (LLM_MAX_INPUT_TOKENS)")
                )
                continue
            cost = group.tokens + self.limits.max_output_tokens
            if cost > left:
                outcome.not_reviewed += [Skipped(path, why) for path in group.paths]
                left = 0  # stop here: later requests must not jump the queue
                continue
            left -= cost
            planned.append(group)
        return planned

    async def _call(self, request: prompt.Request, schema: OutputSchema, max_tokens: int) -> Completion:
        async with self._gate:
            try:
                reply = await self.provider.complete(
                    system=request.system, user=request.user, schema=schema, max_tokens=max_tokens
                )
            except ProviderError as exc:
                self._record(exc)
                raise
        self._record(None)
        return reply

    async def _complete(self, request: prompt.Request, outcome: Outcome) -> Completion:
        reply = await self._call(request, FINDINGS_SCHEMA, self.limits.max_output_tokens)
        outcome.requests += 1
        outcome.input_tokens += reply.input_tokens
        outcome.output_tokens += reply.output_tokens
        self.tokens_used += reply.input_tokens + reply.output_tokens
        return reply

    async def _ask(self, context: PullContext, group: Group, outcome: Outcome) -> str | None:
        """One request (and at most one repair); a note for the summary when it failed."""
        request = self._request(context, group.sections)
        names = ", ".join(group.paths[:5]) + (
            f" and {len(group.paths) - 5} more" if len(group.paths) > 5 else ""
        )
        try:
            reply = await self._complete(request, outcome)
            answer, problem = parse(reply.text, ModelAnswer)
            if answer is None:
                log.warning("model answer invalid (%s); asking once to repair it", problem)
                reply = await self._complete(prompt.repair_request(request, reply.text, problem), outcome)
                answer, problem = parse(reply.text, ModelAnswer)
        except ProviderError as exc:
            outcome.not_reviewed += [Skipped(p, f"the model request failed ({exc})") for p in group.paths]
            return f"the model request for {names} failed ({exc})"
        if answer is None:
            log.warning("model answer still invalid after one repair (%s); skipping %s", problem, names)
            outcome.not_reviewed += [
                Skipped(p, "the model's answer was invalid twice (skipped)") for p in group.paths
            ]
            return f"the model's answer for {names} was invalid even after one repair, so it was skipped"
        outcome.reviewed += len(group.sections)
        outcome.shown.update(line for section in group.sections for line in section.shown)
        self._take(outcome, answer.findings, group.sections)
        for section in group.sections:
            mine = [f for f in answer.findings if f.path == section.file.path]
            await self.memory.remember(section.key, ModelAnswer(findings=mine).model_dump_json())
        return None

    @staticmethod
    def _take(outcome: Outcome, findings: Sequence[ModelFinding], sections: Sequence[Section]) -> None:
        paths = {s.file.path for s in sections}
        for f in findings:
            if f.path in paths:
                outcome.findings.append(f)
            else:
                outcome.outside += 1

    # ---------------------------------------------------------------------------- combine
    def _check(
        self, context: PullContext, outcome: Outcome, builtin: Sequence[Finding]
    ) -> tuple[list[tuple[float, Finding]], int, int]:
        """Model findings that pass the mechanical checks, with their confidence; and how many
        were dropped and how many merged into built-in findings."""
        by_path = {s.path: s for s in context.files}
        builtin_lines = {(f.path, f.line) for f in builtin} | {
            (f.path, n) for f in builtin if f.start_line for n in range(f.start_line, f.line + 1)
        }
        texts: dict[str, PatchLines] = {}
        kept: list[tuple[float, Finding]] = []
        dropped, merged = outcome.outside, 0
        for m in outcome.findings:
            changed = by_path.get(m.path)
            category = m.category.strip().lower()
            message = clean_message(m.message)
            if changed is None or category not in CATEGORIES or not message:
                dropped += 1
                continue
            lines = texts.setdefault(m.path, parse_patch(changed.patch))
            first, last = m.line, m.end_line if m.end_line and m.end_line >= m.line else m.line
            if last > outcome.line_counts.get(m.path, last):
                dropped += 1  # not a line of the file
                continue
            if last - first > MAX_SUGGESTION_LINES:
                first = last
            if (m.path, last) in builtin_lines or (m.path, first) in builtin_lines:
                merged += 1
                continue
            severity = SEVERITY[m.severity]
            if severity is Severity.BLOCKER and not context.model.blockers:
                severity = Severity.CONCERN
            suggestion = m.suggestion
            if suggestion is not None and (
                "<!--" in suggestion or "-->" in suggestion or redact_secrets(suggestion) != suggestion
            ):
                suggestion = None
            flagged = "\n".join(lines.added_text.get(n, "") for n in range(first, last + 1)) or message
            kept.append(
                (
                    m.confidence,
                    make_finding(
                        m.path,
                        last,
                        severity,
                        f"llm/{category}",
                        f"{message} (confidence {round(m.confidence * 100)}%)",
                        flagged,
                        start_line=first if first < last else None,
                        suggestion=suggestion,
                    ),
                )
            )
        return kept, dropped, merged

    def _combine(
        self, context: PullContext, base: ReviewResult, outcome: Outcome, *, notes: list[str]
    ) -> ReviewResult:
        checked, dropped, merged = self._check(context, outcome, base.findings)
        checked.sort(key=lambda item: (-item[1].severity, -item[0], item[1].path, item[1].line))
        cap = context.model.max_findings
        shown = [f for _, f in checked[:cap]]
        extra: list[str] = []
        if outcome.reviewed:
            cached = f", {outcome.cached} from cache" if outcome.cached else ""
            extra.append(
                f"the model ({self.provider.model}) reviewed {outcome.reviewed} file"
                f"{'s' if outcome.reviewed != 1 else ''}{cached}"
            )
        if len(checked) > cap:
            extra.append(
                f"{len(checked) - cap} more model findings not shown (review.llm.max_findings: {cap})"
            )
        if merged:
            extra.append(f"{merged} model finding{'s' if merged != 1 else ''} merged into built-in ones")
        if dropped:
            extra.append(f"{dropped} model finding{'s' if dropped != 1 else ''} dropped by the checks")
        if outcome.not_reviewed:
            extra.append(
                f"{len(outcome.not_reviewed)} file{'s' if len(outcome.not_reviewed) != 1 else ''} "
                "not reviewed by the model (listed below)"
            )
        if outcome.related_cut:
            extra.append(
                f"{outcome.related_cut} related definition{'s' if outcome.related_cut != 1 else ''} or call "
                "sites not shown to the model (LLM_MAX_INPUT_TOKENS)"
            )
        order = {f.path: i for i, f in enumerate(context.files)}
        findings = deduplicate(
            sorted(
                [*base.findings, *shown],
                key=lambda f: (order.get(f.path, len(order)), f.path, f.line, -f.severity, f.rule),
            )
        )
        incomplete = base.verdict is not verdict_for(base.findings)
        verdict = verdict_for(findings, incomplete=incomplete)
        withhold = None
        if outcome.reviewed and any(f.rule == INJECTION_RULE for f in findings):
            withhold = (
                f"this pull request holds text addressed to an AI reviewer ({INJECTION_RULE}) and a "
                "language model reviewed it, so a person should look at it"
            )
            if verdict is Verdict.APPROVE:
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
            model_skipped=tuple(outcome.not_reviewed),
            usage=self._usage(outcome),
            prompt_lines=frozenset(outcome.shown),
        )

    def _usage(self, outcome: Outcome) -> tuple[str, ...]:
        if not (outcome.requests or outcome.cached):
            return ()
        lines = [
            f"model: {self.provider.name} {self.provider.model}",
            f"requests: {outcome.requests} ({outcome.cached} file"
            f"{'s' if outcome.cached != 1 else ''} from cache)",
            f"tokens: {outcome.input_tokens:,} input, {outcome.output_tokens:,} output",
        ]
        price_in, price_out = self.limits.price_input_per_mtok, self.limits.price_output_per_mtok
        if price_in or price_out:
            cost = (outcome.input_tokens * price_in + outcome.output_tokens * price_out) / 1_000_000
            lines.append(f"cost: ${cost:.4f}")
        if outcome.today:
            lines.append(outcome.today)
        return tuple(lines)

    # ---------------------------------------------------------------------- verification
    async def judge_thread(
        self,
        *,
        finding: str,
        replies: Sequence[str],
        code: str,
        key_parts: Sequence[str],
        installation_id: int | None = None,
    ) -> ThreadAnswer | None:
        """fixed / not fixed / cannot tell for one thread of the bot (None: no usable answer).
        Cached by the thread, the head, the replies and the model."""
        key = cache_key("thread", self.provider.name, self.provider.model, prompt.PROMPT_VERSION, *key_parts)
        stored = await self.memory.answer(key)
        if stored is not None:
            cached, _ = parse(stored, ThreadAnswer)
            if cached is not None:
                return cached
        over = await self._over_budget(installation_id)
        if over is not None:
            log.info("thread verification by the model skipped: %s", over)
            return None
        request = prompt.thread_request(finding=finding, replies=replies, code=code, schema=THREAD_SCHEMA)
        outcome = Outcome()
        answer: ThreadAnswer | None = None
        try:
            reply = await self._judge(request, outcome)
            answer, problem = parse(reply.text, ThreadAnswer)
            if answer is None:
                reply = await self._judge(prompt.repair_request(request, reply.text, problem), outcome)
                answer, problem = parse(reply.text, ThreadAnswer)
        except ProviderError as exc:
            log.warning("thread verification by the model failed: %s", exc)
        finally:
            if outcome.requests:
                await self.memory.spend(
                    installation_id,
                    self.clock(),
                    input_tokens=outcome.input_tokens,
                    output_tokens=outcome.output_tokens,
                    requests=outcome.requests,
                )
        if answer is not None:
            await self.memory.remember(key, answer.model_dump_json())
        return answer

    async def _judge(self, request: prompt.Request, outcome: Outcome) -> Completion:
        reply = await self._call(request, THREAD_SCHEMA, 512)
        outcome.requests += 1
        outcome.input_tokens += reply.input_tokens
        outcome.output_tokens += reply.output_tokens
        self.tokens_used += reply.input_tokens + reply.output_tokens
        return reply


M = TypeVar("M", ModelAnswer, ThreadAnswer)


def parse(text: str, model: type[M]) -> tuple[M | None, str]:
    """The validated answer, or None and what was wrong with it."""
    try:
        return model.model_validate(extract_json(text)), ""
    except (ValidationError, ValueError) as exc:
        return None, problems(exc)
