"""The language-model reviewer (``REVIEWER=llm``): the built-in reviewer, plus a model.

This module runs a review; the rest of the package holds the parts: ``prompt`` (what the model
is shown), ``schema`` (what it must answer), ``packing`` (limits, daily budgets, requests),
``client`` (the provider behind a gate, its health and usage), ``checks`` (model findings
checked before posting), ``combine`` (the built-in review and the model's work, one result),
``trust`` (canary, coverage and steering: what may approve),
``judge`` (thread judgement), ``memory`` (answers and usage kept), and ``related`` (what a
changed function calls and who calls it), found with the head lines shown around each change by
the jobs of ``bounded``, inside the execution boundary: nothing of the PR is parsed here.

1. The built-in review runs first and always; its findings are never dropped and are given to
   the model as facts. Repository skip rules (drafts, title keywords, labels, authors) and the
   daily token budgets (installation, pull request, author) may stop the model, never the
   built-in review: the summary says why.
2. Each analysed file (minus ``review.llm.skip.paths``) becomes a section (``prompt``); a file
   whose answer is cached under (blob sha, its diff, prompt version, model; plus the replies in
   the bot's threads on that file, which the model must hear) costs nothing.
3. The other sections are packed into requests under ``LLM_MAX_INPUT_TOKENS`` (the provider's
   tokenizer when its SDK has one, else bytes/4), planned in order against
   ``LLM_MAX_TOKENS_PER_REVIEW`` and the budgets (input plus the output allowance, so the cap
   holds), and sent ``LLM_CONCURRENCY`` at a time. An invalid answer gets one repair request,
   then its files are named as not reviewed; an answer without its request's canary is dropped.
4. Every model finding is checked mechanically (``checks``); the ``review.llm.max_findings``
   most important are kept; steering the model reports and untrusted answers are ``injection/``
   concerns, never capped.
5. The verdict comes from severities exactly as for the built-in reviewer, but approval also
   needs the model to have confirmed every file it was given as reviewed with nothing found,
   and a PR that tried to steer the model is never approved (``trust``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from pydantic import ValidationError

from ..analyzers import is_python
from ..core.diff import PatchLines, parse_patch
from ..core.model import (
    ChangedFile,
    FileContent,
    ModelInputsReader,
    PullContext,
    Reviewer,
    ReviewResult,
    Skipped,
    ThreadJudgement,
    ThreadQuestion,
)
from ..core.selection import matching_pattern
from ..engine.builtin import BuiltinReviewer
from ..engine.inert import code
from . import prompt, trust
from .bounded import ContextJob, FileContext, ImportsJob, Reviewed, settle
from .client import ModelClient, cache_key
from .combine import ModelWork, combine
from .judge import ThreadJudge
from .memory import InMemory, Memory
from .packing import Budget, Group, Limits, Section, charges_for, pack, plan
from .providers import Provider, ProviderError, estimate_tokens
from .schema import FINDINGS_SCHEMA, ModelAnswer, parse

log = logging.getLogger(__name__)


def skip_reason(context: PullContext) -> str | None:
    """Why the repository's rules say the model does not review this PR, or None."""
    options = context.model
    if options.skip_drafts and context.draft:
        return "the pull request is a draft (review.llm.skip.drafts)"
    title = context.title.casefold()
    for keyword in options.skip_title_keywords:
        if keyword.strip() and keyword.casefold() in title:
            return f"its title contains {code(keyword)} (review.llm.skip.title_keywords)"
    labels = {label.casefold() for label in context.labels}
    for label in options.skip_labels:
        if label.casefold() in labels:
            return f"it has the label {code(label)} (review.llm.skip.labels)"
    author = (context.author_login or "").casefold()
    if author and author in {a.casefold() for a in options.skip_authors}:
        return f"its author {context.author_login} is in review.llm.skip.authors"
    return None


class LlmReviewer(Reviewer):
    """``model.Reviewer`` with a model; ``builtin`` is the reviewer whose findings are facts."""

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
        self.client = ModelClient(provider, concurrency=self.limits.concurrency, clock=clock)
        self.budget = Budget(self.limits, self.memory, clock)
        self.judge = ThreadJudge(self.client, budget=self.budget, memory=self.memory)

    @property
    def id(self) -> str:
        return f"llm {self.provider.name} {self.provider.model}"  # not a rule id: no "llm/" prefix

    async def prepare(self, context: PullContext, inputs: ModelInputsReader) -> PullContext:
        loaded = await inputs()
        return replace(context, model=loaded.model, prior=loaded.prior)

    def mechanical(self) -> Reviewer:
        return self.builtin

    def judges_threads(self) -> bool:
        return True

    async def judge_thread(self, question: ThreadQuestion) -> ThreadJudgement | None:
        return await self.judge.judge(question)

    def tokens_used(self) -> int:
        return self.client.tokens_used

    def health(self) -> dict[str, object]:
        """For ``/healthz``: whether the provider's last request succeeded."""
        return self.client.health()

    async def aclose(self) -> None:
        await self.client.aclose()

    # ------------------------------------------------------------------------------ review
    async def review(self, context: PullContext) -> ReviewResult:
        base = await self.builtin.review(context)
        charges = charges_for(context.installation_id, context.repo, context.pr_number, context.author_login)
        reason = skip_reason(context)
        if reason is None:
            reason = await self.budget.over(context.installation_id, charges)
        if reason is not None:
            log.info("model review skipped: %s", reason)
            return combine(
                context,
                base,
                ModelWork(),
                model=self.provider.model,
                usage=(),
                notes=[f"the model did not review this pull request: {reason}"],
                skipped=reason,
            )
        work = ModelWork()
        notes: list[str] = []
        sections = await self._sections(context, base, work, notes)
        work.given = [s.file.path for s in sections]
        pending = await self._cached(sections, work)
        overhead = self._request(context, [])
        groups = await pack(
            pending,
            limit=self.limits.max_input_tokens,
            overhead=estimate_tokens(overhead.system + overhead.user),
            measure=lambda sections: self._measure(context, sections),
        )
        planned, left_out = plan(
            groups, self.limits, await self.budget.allowance(context.installation_id, charges)
        )
        work.not_reviewed += left_out
        results = await asyncio.gather(*(self._ask(context, group, work) for group in planned))
        failures = [note for note in results if note]
        notes += failures
        await self.budget.spend(context.installation_id, work.tally, charges)
        log.info(
            "model review: %d files (%d cached) in %d requests, %d input + %d output tokens, %d not reviewed",
            work.reviewed,
            work.cached,
            work.tally.requests,
            work.tally.input_tokens,
            work.tally.output_tokens,
            len(work.not_reviewed),
        )
        if work.tally.requests or work.cached:
            work.today = await self.budget.today(context.installation_id)
        return combine(context, base, work, model=self.provider.model, usage=self._usage(work), notes=notes)

    async def _sections(
        self, context: PullContext, base: ReviewResult, work: ModelWork, notes: list[str]
    ) -> list[Section]:
        analysed = set(base.analysed)
        files: list[ChangedFile] = []
        for f in context.files:
            if f.path not in analysed or f.patch is None:
                continue
            pattern = matching_pattern(context.model.skip_paths, f.path)
            if pattern is not None:
                work.not_reviewed.append(Skipped(f.path, f"review.llm.skip.paths ({code(pattern)})"))
                continue
            files.append(f)
        contents = dict(await context.read([f.path for f in files])) if files else {}
        patches = {f.path: parse_patch(f.patch) for f in files}
        found = await self._contexts(context, contents, patches, notes)
        sections: list[Section] = []
        for f in files:
            content = contents.get(f.path)
            text = content.text if content is not None else None
            lines = patches[f.path]
            prior = [p for p in context.prior if p.path == f.path]
            if text is not None:
                work.line_counts[f.path] = len(text.splitlines())
            file_context = found.get(f.path) or FileContext(
                f.path, head=prompt.head_context(lines, text) if text is not None else prompt.HeadContext()
            )
            work.related_cut += file_context.related.cut
            rendered = prompt.render_file(
                path=f.path,
                status=f.status,
                patch=f.patch or "",
                lines=lines,
                text=text,
                builtin=[x for x in base.findings if x.path == f.path],
                prior=prior,
                head=file_context.head,
                related=file_context.related.lines,
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
                *file_context.related.lines,  # what the file calls elsewhere may have changed without it
            )
            sections.append(
                Section(
                    file=f,
                    text=rendered,
                    tokens=estimate_tokens(rendered),
                    key=key,
                    shown=frozenset(
                        {(f.path, n) for n in lines.right_lines}
                        | {(f.path, n) for n in file_context.head.lines}
                        | file_context.related.shown
                    ),
                )
            )
        return sections

    def _related_budget(self) -> int:
        """Characters of related context per file: an eighth of a request (about 4 characters a token)."""
        return self.limits.max_input_tokens // 8 * 4

    async def _contexts(
        self,
        context: PullContext,
        contents: Mapping[str, FileContent | None],
        patches: Mapping[str, PatchLines],
        notes: list[str],
    ) -> dict[str, FileContext]:
        """Each changed Python file's related context and head lines, found inside the execution
        boundary (``bounded``) in what it reads: the changed files, and what they import from the
        repository and the files beside them (one tree read, one batched read). Nothing of the
        pull request is parsed here."""
        changed = {p: c.text for p, c in contents.items() if c is not None and c.text and is_python(p)}
        if not changed:
            return {}
        boundary = self.builtin.boundary
        listing = await context.tree() if context.tree is not None else None
        files = listing.files if listing is not None else frozenset(changed)
        texts = dict(changed)
        left_out: frozenset[str] = frozenset()
        if listing is not None:
            wanted, left_out = await settle(boundary, ImportsJob(changed, files), notes)
            extra = list(wanted.paths) if wanted is not None else []
            read = dict(await context.read(extra)) if extra else {}
            texts |= {p: c.text for p, c in read.items() if c is not None and c.text}
        job = ContextJob(
            tuple(Reviewed(p, patches[p]) for p in changed),
            texts,
            files,
            self._related_budget(),
            left_out=left_out,
        )
        found, _ = await settle(boundary, job, notes)
        if found is None:
            return {}
        notes += found.notes
        return {item.path: item for item in found.files}

    async def _cached(self, sections: Sequence[Section], work: ModelWork) -> list[Section]:
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
            work.cached += 1
            work.reviewed += 1
            work.shown |= section.shown
            self._take(work, answer, [section])
        return pending

    def _request(
        self, context: PullContext, sections: Sequence[Section], canary: str = "0" * 16
    ) -> prompt.Request:
        """``canary``: the real one for a request that is sent; a stand-in of its size to measure."""
        return prompt.review_request(
            title=context.title,
            body=context.body,
            instructions=context.model.instructions,
            learnings=context.model.learnings,
            sections=[s.text for s in sections],
            schema=FINDINGS_SCHEMA,
            max_findings=max(1, context.model.max_findings),
            canary=canary,
        )

    async def _measure(self, context: PullContext, sections: Sequence[Section]) -> int:
        request = self._request(context, sections)
        counted = await self.provider.count_tokens(
            system=request.system, user=request.user, schema=FINDINGS_SCHEMA
        )
        return counted if counted is not None else estimate_tokens(request.system + request.user)

    async def _ask(self, context: PullContext, group: Group, work: ModelWork) -> str | None:
        """One request (and at most one repair); a note for the summary when it failed."""
        canary, request_id = secrets.token_hex(8), uuid.uuid4().hex[:12]
        request = self._request(context, group.sections, canary)
        names = ", ".join(group.paths[:5]) + (
            f" and {len(group.paths) - 5} more" if len(group.paths) > 5 else ""
        )
        try:
            reply = await self.client.ask(request, FINDINGS_SCHEMA, self.limits.max_output_tokens, work.tally)
            answer, problem = parse(reply.text, ModelAnswer)
            if answer is None:
                log.warning("model answer invalid (%s); asking once to repair it", problem)
                repair = prompt.repair_request(request, reply.text, problem)
                reply = await self.client.ask(
                    repair, FINDINGS_SCHEMA, self.limits.max_output_tokens, work.tally
                )
                answer, problem = parse(reply.text, ModelAnswer)
        except ProviderError as exc:
            work.not_reviewed += [Skipped(p, f"the model request failed ({exc})") for p in group.paths]
            return f"the model request for {names} failed ({exc})"
        if answer is None:
            log.warning("model answer still invalid after one repair (%s); skipping %s", problem, names)
            work.not_reviewed += [
                Skipped(p, "the model's answer was invalid twice (skipped)") for p in group.paths
            ]
            return f"the model's answer for {names} was invalid even after one repair, so it was skipped"
        if answer.canary.strip() != canary:
            # Steered off its instructions by what it read: nothing of this answer is used or kept.
            log.warning(
                "model answer without its request's canary: request %s (%s) for %s treated as untrusted",
                request_id,
                self.provider.model,
                names,
            )
            work.untrusted += 1
            work.injection.append(trust.untrusted_finding(group.paths, request_id))
            work.not_reviewed += [
                Skipped(p, f"the model's answer was not trustworthy (request {request_id})")
                for p in group.paths
            ]
            return f"the model's answer for {names} was not trustworthy (request {request_id})"
        work.reviewed += len(group.sections)
        work.shown.update(line for section in group.sections for line in section.shown)
        self._take(work, answer, group.sections)
        matched = trust.covers(answer, group.paths)  # else nothing is confirmed
        for section in group.sections:
            path = section.file.path
            mine = ModelAnswer(
                files=[c for c in answer.files if c.path == path] if matched else [],
                findings=[f for f in answer.findings if f.path == path],
                steering=[r for r in answer.steering if r.path == path],
            )
            await self.memory.remember(section.key, mine.model_dump_json())
        return None

    @staticmethod
    def _take(work: ModelWork, answer: ModelAnswer, sections: Sequence[Section]) -> None:
        paths = [s.file.path for s in sections]
        for f in answer.findings:
            if f.path in paths:
                work.findings.append(f)
            else:
                work.outside += 1
        work.confirmed |= trust.confirmed(answer, paths)
        work.reported |= trust.reported(answer, paths)
        work.injection += [
            trust.steering_finding(report, paths=paths, line_counts=work.line_counts)
            for report in answer.steering
        ]

    def _usage(self, work: ModelWork) -> tuple[str, ...]:
        tally = work.tally
        if not (tally.requests or work.cached):
            return ()
        lines = [
            f"model: {self.provider.name} {self.provider.model}",
            f"requests: {tally.requests} ({work.cached} file{'s' if work.cached != 1 else ''} from cache)",
            f"tokens: {tally.input_tokens:,} input, {tally.output_tokens:,} output",
        ]
        price_in, price_out = self.limits.price_input_per_mtok, self.limits.price_output_per_mtok
        if price_in or price_out:
            cost = (tally.input_tokens * price_in + tally.output_tokens * price_out) / 1_000_000
            lines.append(f"cost: ${cost:.4f}")
        if work.today:
            lines.append(work.today)
        return tuple(lines)
