"""The built-in reviewer (``REVIEWER=builtin``): offline, deterministic, no GitHub calls.

1. Select the files to analyse (``selection.select_files``); every other file gets a reason.
2. List the repository once (``context.tree``), ask each analyzer which contents it needs and
   read them all in ONE ``context.read`` call; read the lint configuration files on the selected
   paths at the base (``context.read_base``): the pull request never chooses the rules it is
   judged by. What the repository keeps out of linting (``lintconfig``) is listed, and only
   secrets and conflict markers are looked for there.
   Everything that evaluates what was read runs inside the execution boundary (``isolation``,
   jobs in ``bounded``): parsing the configuration, its patterns, every analyzer. A limit that
   trips there is a note in the summary, and the stage it tripped in is left out.
3. Run the analyzers; keep findings on lines the pull request added or changed (file-level
   findings and syntax errors excepted), and of those only what the pull request introduced:
   a differential analyzer's findings are matched with its findings on the file's base side
   (rebuilt from the patch, so no call; cached by text across rounds and pull requests) and
   what stood there is counted, not blamed (``core.differential``); deduplicate by fingerprint.
4. Decide: a blocker requests changes, a concern or a nit comments, nothing approves — unless the
   analysis is incomplete for a reason the pull request controls (``incomplete_analysis``).
   (Policy — approvals disabled, the bot's own pull request — is applied later, by the caller.)
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

from cachetools import LRUCache

from ...settings.config import load_analysis_settings
from ..analyzers import LINTERS, Analyzer, default_analyzers, find_tool, is_python
from ..core.differential import Identity
from ..core.model import (
    ChangedFile,
    FileContent,
    Finding,
    PullContext,
    Reviewer,
    ReviewResult,
    Severity,
    SkipCause,
    Skipped,
    Verdict,
)
from ..core.selection import select_files
from ..isolation.limits import AnalysisError, Budget, Job, Limit, Tripped
from ..isolation.pool import Boundary, shared_pool
from .bounded import EvaluateJob, Evaluation, Scope, ScopeJob, base_key
from .inputs import (
    MAX_CONFIG_CANDIDATES,
    MAX_CONFIG_DEPTH,
    base_config_paths,
    base_sides,
    capped_configs,
    rules_digest,
    size_label,
    within_bytes,
)
from .ruffpins import RuffPins

__all__ = [
    "MAX_CONFIG_CANDIDATES",
    "MAX_CONFIG_DEPTH",
    "BuiltinReviewer",
    "base_config_paths",
    "capped_configs",
    "deduplicate",
    "summarise",
    "verdict_for",
]

log = logging.getLogger(__name__)

R = TypeVar("R")
MAX_TRIPS = 3  # stages left out, one by one, before the analysis is given up
# Jobs one review may spend finding the files a failing analyzer trips on (halving the files each
# time: one hostile file among 256 takes about 16). Beyond it, what is still unresolved is refused.
MAX_PROBES = 24
BASE_CACHE_SIDES = 4096  # base sides whose findings are remembered (a few KB each at most)


class BuiltinReviewer(Reviewer):
    """The offline engine: ``model.Reviewer``'s defaults (no model, no threads to judge). Reads
    from GitHub in the serving process; evaluates what it read only inside ``boundary`` (default:
    the process's pool, ``REVIEW_*`` settings)."""

    @property
    def id(self) -> str:
        return "builtin"

    def __init__(
        self,
        analyzers: Sequence[Analyzer] | None = None,
        *,
        boundary: Boundary | None = None,
        ruff_pins: RuffPins | None = None,
    ) -> None:
        self.analyzers: list[Analyzer] = list(analyzers) if analyzers is not None else default_analyzers()
        self._boundary = boundary
        if ruff_pins is None and boundary is None:
            settings = load_analysis_settings()
            if settings.review_ruff_versions is not None:
                ruff_pins = RuffPins(settings.review_ruff_versions, keep=settings.review_ruff_keep)
        self.ruff_pins = ruff_pins
        # The findings of base sides already analysed (``bounded.base_key``): a base side is
        # analysed once under the same rules, across rounds and pull requests.
        self._base_cache: LRUCache[str, tuple[Identity, ...]] = LRUCache(maxsize=BASE_CACHE_SIDES)

    @property
    def boundary(self) -> Boundary:
        if self._boundary is None:
            self._boundary = shared_pool()
        return self._boundary

    async def review(self, context: PullContext) -> ReviewResult:
        settings = context.settings
        selection = select_files(
            context.files, paths_ignore=settings.paths_ignore, max_files=settings.max_files
        )
        skipped = list(selection.skipped)

        # The repository's layout (one tree read), and its own lint configuration read from the
        # base: the pull request never chooses the rules it is judged by (a change to them is a
        # finding of the ``config`` analyzer, which reads the head's side).
        selected = [f.path for f in (*selection.analysable, *selection.unpatched)]
        tree = await context.tree() if context.tree is not None and selected else None
        configs, capped = capped_configs(base_config_paths(selected, tree, context.files) if selected else [])
        notes: list[str] = [capped] if capped else []
        wanted: dict[str, None] = {}
        for analyzer in self.analyzers:
            wanted.update(dict.fromkeys(analyzer.wanted_paths(selection.analysable, selection.unpatched)))
        if settings.settings_path in {f.path for f in selection.analysable}:
            wanted[settings.settings_path] = None  # the bot's own settings, changed by the PR
        if tree is not None and not tree.truncated:  # a path the head does not hold is not read
            wanted = {path: None for path in wanted if path in tree.files}
        contents = dict(await context.read(list(wanted))) if wanted else {}
        limit = self.boundary.limits.review_bytes
        contents, over = within_bytes(contents, limit)
        if over:  # what the review cannot afford to keep is not analysed, and said so
            why = f"not analysed: past the review's limit of {size_label(limit)} of files"
            skipped += [Skipped(path, why) for path in over]
            selection = replace(
                selection,
                analysable=tuple(f for f in selection.analysable if f.path not in over),
                unpatched=tuple(f for f in selection.unpatched if f.path not in over),
            )
        read_base = context.read_base
        base_configs = dict(await read_base(configs)) if read_base is not None and configs else {}
        budget = Budget(self.boundary.limits.budget_seconds)  # the child time of this review

        python = tuple(f.path for f in selection.analysable if is_python(f.path))
        scope = await self._run(ScopeJob(base_configs, python), budget)
        if isinstance(scope, Tripped):
            notes.append(scope.note())
            scope = Scope()
        if scope.extends and read_base is not None:
            base_configs.update(await read_base(list(scope.extends)))

        base = await base_sides(selection.analysable, contents, read_base)
        base, _ = within_bytes(base, max(0, limit - sum(c.size for c in contents.values() if c is not None)))
        async with self._tools(scope, notes) as tools:
            digest = rules_digest(self.analyzers, base_configs, tools, settings)
            known = self._known_sides(digest, selection.analysable, base)
            job = EvaluateJob(
                tuple(self.analyzers),
                selection.analysable,
                selection.unpatched,
                contents,
                settings,
                configs=base_configs,
                tree=tree,
                tools=tools,
                title=context.title,
                body=context.body,
                author=context.author_login or "",
                pattern_seconds=self.boundary.limits.pattern_seconds,
                base=base,
                rules_digest=digest,
                base_known=known,
            )
            evaluation = await self._evaluate(job, notes, budget)
        self._base_cache.update(evaluation.base_seen)

        return _result_of(context, evaluation, skipped, notes)

    def _known_sides(
        self, digest: str, analysable: Sequence[ChangedFile], base: Mapping[str, FileContent | None]
    ) -> dict[str, tuple[Identity, ...]]:
        """What the cache knows of this review's base sides, for each differential analyzer."""
        known: dict[str, tuple[Identity, ...]] = {}
        for f in analysable:
            side = base.get(f.previous_path or f.path)
            if side is None or side.text is None:
                continue
            for analyzer in self.analyzers:
                key = base_key(digest, analyzer.name, f.path, side) if analyzer.differential else None
                if key is not None and key in self._base_cache:
                    known[key] = self._base_cache[key]
        return known

    async def _run(self, job: Job[R], budget: Budget) -> R | Tripped:
        """``boundary.run``, where even a boundary that cannot run the job is an answer."""
        try:
            return await self.boundary.run(job, budget)
        except AnalysisError as exc:
            log.warning("the analysis could not run: %s", exc)
            return Tripped(Limit.FAILED, None, self.boundary.limits, type(exc).__name__)

    @contextlib.asynccontextmanager
    async def _tools(self, scope: Scope, notes: list[str]) -> AsyncIterator[dict[str, tuple[str, ...]]]:
        """The programs the analysis runs: the linters found on this host, and instead of its own
        ruff the one the repository pins, leased (kept installed) until the analysis is done."""
        tools: dict[str, tuple[str, ...]] = {}
        # The other linters the analyzers run, found here (a missing one: the analyzer says so).
        for tool in LINTERS:
            found = find_tool(tool.program) if any(tool.program in a.tools for a in self.analyzers) else None
            if found is not None:
                tools[tool.program] = tuple(found)
        if scope.pin is None or self.ruff_pins is None:
            yield tools
            return
        async with self.ruff_pins.lease(scope.pin) as pinned:
            if pinned is None:
                notes.append(f"the pinned ruff {scope.pin.label} could not be installed")
            else:
                tools["ruff"] = tuple(pinned)
            yield tools

    async def _evaluate(self, job: EvaluateJob, notes: list[str], budget: Budget) -> Evaluation:
        """Run ``job``; a limit that trips in a stage is noted and the job runs again without
        that stage. A limit outside any stage, or too many, or the review's ``budget`` spent,
        ends the analysis: nothing analysed."""
        reason = "not analysed: the analysis could not finish (see the notes)"
        for _ in range(MAX_TRIPS + 1):
            if budget.remaining <= 0:
                reason = f"not analysed: the review's analysis budget of {budget.seconds:g} s was spent"
                notes.append(f"the review's analysis budget of {budget.seconds:g} s was spent")
                break
            outcome = await self._run(job, budget)
            if not isinstance(outcome, Tripped):
                return outcome
            notes.append(outcome.note())
            if outcome.limit is Limit.BUDGET:
                reason = f"not analysed: the review's analysis budget of {budget.seconds:g} s was spent"
                break
            if (
                outcome.stage is None
                or outcome.stage.key in job.left_out
                or outcome.stage.key == "configuration"
            ):
                break
            key = outcome.stage.key
            culprits = await self._culprits(job, key, budget) if key not in job.refused else None
            if culprits:  # the stage runs again on every other file
                job = replace(job, refused={**job.refused, key: culprits})
            else:  # no file alone makes it fail (or it is no analyzer's): the stage is left out
                job = replace(job, left_out=job.left_out | {key})
        return Evaluation(
            skipped=tuple(Skipped(f.path, reason) for f in (*job.analysable, *job.unpatched)),
            incomplete=True,
        )

    async def _culprits(self, job: EvaluateJob, key: str, budget: Budget) -> frozenset[str] | None:
        """The files the stage ``key`` (an analyzer's) fails on, found by running that analyzer
        alone on halves of the files, then halves of the halves that fail (``MAX_PROBES`` jobs at
        most; a part still unresolved then is refused whole). None: it is no analyzer's stage,
        or it failed on no part alone (its limit tripped on all the files together), or on every
        file alone (what fails is not in the files: a tool that cannot start)."""
        analyzer = next((a for a in job.analyzers if f"analyzer:{a.name}" == key), None)
        if analyzer is None:
            return None
        paths = [f.path for f in (*job.analysable, *job.unpatched)]
        found: set[str] = set()
        parts, probes = [paths], 0
        while parts:
            part = parts.pop()
            if probes >= MAX_PROBES or budget.remaining <= 0:
                found.update(part)
                continue
            probes += 1
            kept = set(part)
            probe = replace(
                job,
                analyzers=(analyzer,),
                analysable=tuple(f for f in job.analysable if f.path in kept),
                unpatched=tuple(f for f in job.unpatched if f.path in kept),
                left_out=frozenset(),
                refused={},
            )
            if not isinstance(await self._run(probe, budget), Tripped):
                continue
            if len(part) == 1:
                found.update(part)
            else:
                parts += [part[: len(part) // 2], part[len(part) // 2 :]]
        log.info("the %s stage failed on %d of %d files (%d probes)", key, len(found), len(paths), probes)
        return frozenset(found) if found and len(found) < len(paths) else None


def _result_of(
    context: PullContext, evaluation: Evaluation, skipped: list[Skipped], notes: list[str]
) -> ReviewResult:
    """The review's result from what the analysis found: findings in the order of the pull
    request's files, deduplicated; what was not analysed; the verdict."""
    order = {f.path: index for index, f in enumerate(context.files)}
    findings = deduplicate(
        sorted(
            evaluation.findings,
            key=lambda f: (order.get(f.path, len(order)), f.path, f.line, -f.severity, f.rule),
        )
    )
    skipped.extend(evaluation.skipped)
    skipped.sort(key=lambda s: order.get(s.path, len(order)))
    notes = [*evaluation.notes, *notes]
    if context.files_truncated:
        listed = len(context.files)
        notes.insert(0, f"GitHub listed only the first {listed} changed files; the rest were not reviewed")
    incomplete = incomplete_analysis(evaluation, skipped, truncated=context.files_truncated)
    return ReviewResult(
        verdict=verdict_for(findings, incomplete=incomplete),
        summary=summarise(
            findings,
            changed=len(context.files),
            analysed=evaluation.analysed,
            skipped=skipped,
            notes=notes,
        ),
        findings=tuple(findings),
        skipped=tuple(skipped),
        analysed=evaluation.analysed,
        notes=tuple(notes),
        incomplete=incomplete,
        suppressed=evaluation.suppressed,
        preexisting=evaluation.preexisting,
    )


def incomplete_analysis(evaluation: Evaluation, skipped: Sequence[Skipped], *, truncated: bool) -> bool:
    """Whether approval is out of reach: a check could not run, a file was not analysed for a
    reason the pull request controls, nothing was analysed at all, or GitHub listed only part
    of the files."""
    return (
        evaluation.incomplete
        or truncated
        or not evaluation.analysed
        or any(s.cause is SkipCause.PULL_REQUEST for s in skipped)
    )


def verdict_for(findings: Sequence[Finding], *, incomplete: bool = False) -> Verdict:
    """Blocker -> REQUEST_CHANGES; concern or nit -> COMMENT; nothing -> APPROVE, unless a check
    could not run (``incomplete``): an unchecked file is not approved."""
    severities = {f.severity for f in findings}
    if Severity.BLOCKER in severities:
        return Verdict.REQUEST_CHANGES
    if severities or incomplete:
        return Verdict.COMMENT
    return Verdict.APPROVE


def deduplicate(findings: Sequence[Finding]) -> list[Finding]:
    """One finding per fingerprint and line. The same fingerprint on the same line (two undefined
    names in one line) merges into one finding; on another line (the same text flagged twice
    in a file) it stays a separate finding whose fingerprint gets an occurrence number, so each
    stays stable when lines shift. One pass, each finding looked up by (fingerprint, line)."""
    groups: dict[tuple[str, int], list[Finding]] = {}  # in the order of their first finding
    for f in findings:
        groups.setdefault((f.fingerprint, f.line), []).append(f)
    occurrences: Counter[str] = Counter()
    out: list[Finding] = []
    for (fingerprint, _), group in groups.items():
        merged = _merged(group)
        occurrences[fingerprint] += 1
        if occurrences[fingerprint] > 1:
            merged = replace(
                merged,
                fingerprint=_numbered(fingerprint, occurrences[fingerprint]),
                content=_numbered(merged.content, occurrences[fingerprint]) if merged.content else "",
            )
        out.append(merged)
    return out


def _numbered(digest: str, occurrence: int) -> str:
    return hashlib.sha1(f"{digest}\0{occurrence}".encode()).hexdigest()[:16]


def _merged(group: Sequence[Finding]) -> Finding:
    """The first finding of ``group``, with the other messages it does not say yet appended, the
    highest severity, and a suggestion only when they all suggest the same."""
    first = group[0]
    messages = [first.message]
    said = {first.message, *first.message.split("; ")}
    severity, suggestion = first.severity, first.suggestion
    for f in group[1:]:
        if f.message in said:
            continue
        messages.append(f.message)
        said.update((f.message, *f.message.split("; ")))
        severity = max(severity, f.severity)
        suggestion = suggestion if suggestion == f.suggestion else None
    if len(messages) == 1:
        return first
    message = one_sentence(messages) or "; ".join(messages)
    return replace(first, message=message, severity=severity, suggestion=suggestion)


_SPAN = re.compile(r"`[^`]+`")
MAX_NAMED = 3  # names one merged sentence lists before "and N more"


def one_sentence(messages: Sequence[str]) -> str | None:
    """Messages that differ only in the one name each quotes, as one sentence that names them all
    ("`os`, `sys` and `json` imported but unused"); None when they differ otherwise."""
    shapes = {_SPAN.sub("`?`", m, count=1) for m in messages}
    names = [span.group(0) for m in messages if (span := _SPAN.search(m)) is not None]
    if len(shapes) != 1 or len(names) != len(messages) or shapes == {messages[0]}:
        return None
    shown = names[:MAX_NAMED]
    rest = len(names) - len(shown)
    listed = (
        ", ".join(shown[:-1]) + f" and {shown[-1]}" if rest == 0 else ", ".join(shown) + f" and {rest} more"
    )
    return shapes.pop().replace("`?`", listed, 1)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def summarise(
    findings: Sequence[Finding],
    *,
    changed: int,
    analysed: Sequence[str],
    skipped: Sequence[Skipped],
    notes: Sequence[str] = (),
) -> str:
    """One or two plain sentences: the counts, then anything that limited the review."""
    counts = Counter(f.severity for f in findings)
    parts = [
        _plural(counts[severity], severity.label)
        for severity in (Severity.BLOCKER, Severity.CONCERN, Severity.NIT)
        if counts[severity]
    ]
    skipped_paths = {s.path for s in skipped} - set(analysed)
    skipped_text = f"; {_plural(len(skipped_paths), 'file')} skipped" if skipped_paths else ""
    if parts:
        with_findings = len({f.path for f in findings})
        first = f"{', '.join(parts)} in {with_findings} of {_plural(changed, 'changed file')}{skipped_text}."
    elif analysed:
        first = f"No findings in {_plural(len(analysed), 'analysed file')}{skipped_text}."
    elif changed:
        first = f"Nothing analysed: {_plural(len(skipped_paths), 'file')} skipped."
    else:
        first = "No changed files to review."
    if not notes:
        return first
    second = "; ".join(notes)
    return f"{first} {second[0].upper()}{second[1:]}."
