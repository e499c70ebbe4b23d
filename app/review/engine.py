"""The built-in reviewer (``REVIEWER=builtin``): offline, deterministic, no GitHub calls.

1. Select the files to analyse (``selection.select_files``); every other file gets a reason.
2. List the repository once (``context.tree``), ask each analyzer which contents it needs, add the
   lint configuration files on the selected paths, and read them all in ONE ``context.read`` call.
   What the repository keeps out of linting (``lintconfig``) is listed, and only secrets and
   conflict markers are looked for there.
   Everything that evaluates what was read runs inside the execution boundary (``isolation``,
   jobs in ``bounded``): parsing the configuration, its patterns, every analyzer. A limit that
   trips there is a note in the summary, and the stage it tripped in is left out.
3. Run the analyzers; keep findings on lines the pull request added or changed (file-level
   findings and syntax errors excepted); deduplicate by fingerprint.
4. Decide: a blocker requests changes, a concern or a nit comments, nothing approves. (Policy —
   approvals disabled, the bot's own pull request — is applied later, by the caller.)
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from ..config import load_analysis_settings
from .analyzers import LINTERS, Analyzer, default_analyzers, find_tool, is_python
from .bounded import EvaluateJob, Evaluation, Scope, ScopeJob, config_contents
from .diff import base_of
from .isolation.limits import Tripped
from .isolation.pool import Boundary, shared_pool
from .lintconfig import config_paths
from .model import (
    FileContent,
    Finding,
    PullContext,
    Reviewer,
    ReviewResult,
    Severity,
    Skipped,
    Verdict,
)
from .ruffpins import RuffPins
from .selection import select_files

__all__ = ["BuiltinReviewer", "deduplicate", "summarise", "verdict_for"]

MAX_TRIPS = 3  # stages left out, one by one, before the analysis is given up


class BuiltinReviewer(Reviewer):
    """The offline engine: ``model.Reviewer``'s defaults (no model, no threads to judge). Reads
    from GitHub in the serving process; evaluates what it read only inside ``boundary`` (default:
    the process's pool, ``REVIEW_*`` settings)."""

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

        # The repository's layout (one tree read) and its own lint configuration.
        selected = [f.path for f in (*selection.analysable, *selection.unpatched)]
        tree = await context.tree() if context.tree is not None and selected else None
        configs = config_paths(selected, tree) if selected else []
        wanted: dict[str, None] = dict.fromkeys(configs)
        for analyzer in self.analyzers:
            wanted.update(dict.fromkeys(analyzer.wanted_paths(selection.analysable, selection.unpatched)))
        contents = dict(await context.read(list(wanted))) if wanted else {}
        notes: list[str] = []

        python = tuple(f.path for f in selection.analysable if is_python(f.path))
        scope = await self.boundary.run(ScopeJob(config_contents(contents, configs), python))
        if isinstance(scope, Tripped):
            notes.append(scope.note())
            scope = Scope()
        if scope.extends:
            contents.update(await context.read(list(scope.extends)))
        tools: dict[str, tuple[str, ...]] = {}
        if scope.pin is not None and self.ruff_pins is not None:
            pinned = await self.ruff_pins.command(scope.pin)
            if pinned is None:
                notes.append(f"the pinned ruff {scope.pin.label} could not be installed")
            else:
                tools["ruff"] = tuple(pinned)
        # The other linters the analyzers run, found here (a missing one: the analyzer says so).
        for tool in LINTERS:
            found = find_tool(tool.program) if any(tool.program in a.tools for a in self.analyzers) else None
            if found is not None:
                tools[tool.program] = tuple(found)

        # The base side of the changed Python files the base had (the API check compares them):
        # rebuilt from the head and the patch, so at the merge base, as the diff is; read from
        # the base only where that fails.
        base: dict[str, FileContent | None] = {}
        unbuilt: list[str] = []
        for f in selection.analysable:
            if f.status not in ("modified", "renamed") or not is_python(f.path):
                continue
            head = contents.get(f.path)
            text = base_of(head.text, f.patch) if head is not None and head.text is not None else None
            if text is None:
                unbuilt.append(f.previous_path or f.path)
            else:
                base[f.previous_path or f.path] = FileContent(text=text, size=len(text.encode()))
        read_base = context.read_base
        if read_base is not None and unbuilt:
            base.update(await read_base(unbuilt))
        job = EvaluateJob(
            tuple(self.analyzers),
            selection.analysable,
            selection.unpatched,
            contents,
            settings,
            tree=tree,
            tools=tools,
            title=context.title,
            body=context.body,
            pattern_seconds=self.boundary.limits.pattern_seconds,
            base=base,
        )
        evaluation = await self._evaluate(job, notes)

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
            notes.insert(
                0, f"GitHub listed only the first {listed} changed files; the rest were not reviewed"
            )
        return ReviewResult(
            verdict=verdict_for(findings, incomplete=evaluation.incomplete),
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
            incomplete=evaluation.incomplete,
        )

    async def _evaluate(self, job: EvaluateJob, notes: list[str]) -> Evaluation:
        """Run ``job``; a limit that trips in a stage is noted and the job runs again without
        that stage. A limit outside any stage, or too many, ends the analysis: nothing analysed."""
        for _ in range(MAX_TRIPS + 1):
            outcome = await self.boundary.run(job)
            if not isinstance(outcome, Tripped):
                return outcome
            notes.append(outcome.note())
            if (
                outcome.stage is None
                or outcome.stage.key in job.left_out
                or outcome.stage.key == "configuration"
            ):
                break
            job = replace(job, left_out=job.left_out | {outcome.stage.key})
        reason = "not analysed: a limit of the analysis tripped"
        return Evaluation(
            skipped=tuple(Skipped(f.path, reason) for f in (*job.analysable, *job.unpatched)),
            incomplete=True,
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
    stays stable when lines shift."""
    out: list[Finding] = []
    by_fingerprint: dict[str, list[int]] = {}  # original fingerprint -> indexes into out
    for f in findings:
        indexes = by_fingerprint.setdefault(f.fingerprint, [])
        same_line = next((i for i in indexes if out[i].line == f.line), None)
        if same_line is not None:
            first = out[same_line]
            if f.message != first.message and f.message not in first.message.split("; "):
                out[same_line] = replace(
                    first,
                    message=f"{first.message}; {f.message}",
                    severity=max(first.severity, f.severity),
                    suggestion=first.suggestion if first.suggestion == f.suggestion else None,
                )
            continue
        if indexes:
            occurrence = len(indexes) + 1
            f = replace(
                f, fingerprint=hashlib.sha1(f"{f.fingerprint}\0{occurrence}".encode()).hexdigest()[:16]
            )
        indexes.append(len(out))
        out.append(f)
    return out


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
