"""The built-in reviewer (``REVIEWER=builtin``): offline, deterministic, no GitHub calls.

1. Select the files to analyse (``selection.select_files``); every other file gets a reason.
2. List the repository once (``context.tree``), ask each analyzer which contents it needs, add the
   lint configuration files on the selected paths, and read them all in ONE ``context.read`` call.
   What the repository keeps out of linting (``lintconfig``) is listed, and only secrets and
   conflict markers are looked for there.
3. Run the analyzers; keep findings on lines the pull request added or changed (file-level
   findings and syntax errors excepted); deduplicate by fingerprint.
4. Decide: a blocker requests changes, a concern or a nit comments, nothing approves. (Policy —
   approvals disabled, the bot's own pull request — is applied later, by the caller.)
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from .analyzers import AnalysisInput, Analyzer, AnalyzerOutput, FileUnderReview, default_analyzers, is_python
from .analyzers.injection import body_findings
from .analyzers.python import SYNTAX_RULE
from .diff import PatchLines, parse_patch
from .lintconfig import config_paths, lint_config, missing_extends
from .model import Finding, PullContext, ReviewResult, Severity, Skipped, Verdict
from .selection import looks_generated, select_files

__all__ = ["FILE_LEVEL_RULES", "BuiltinReviewer", "deduplicate", "summarise", "verdict_for"]

# Reported wherever they are in the file, not only on the lines the pull request touched.
FILE_LEVEL_RULES = frozenset({SYNTAX_RULE})
GENERATED_HEADER = "generated (its header says do not edit)"


class BuiltinReviewer:
    """Implements ``model.Reviewer``."""

    def __init__(self, analyzers: Sequence[Analyzer] | None = None) -> None:
        self.analyzers: list[Analyzer] = list(analyzers) if analyzers is not None else default_analyzers()

    async def review(self, context: PullContext) -> ReviewResult:
        settings = context.settings
        selection = select_files(
            context.files, paths_ignore=settings.paths_ignore, max_files=settings.max_files
        )
        skipped = list(selection.skipped)

        # The repository's layout (one tree read) and its own lint configuration.
        selected = [f.path for f in (*selection.analysable, *selection.unpatched)]
        tree = await context.tree() if context.tree is not None and selected else None
        wanted: dict[str, None] = dict.fromkeys(config_paths(selected, tree)) if selected else {}
        for analyzer in self.analyzers:
            wanted.update(dict.fromkeys(analyzer.wanted_paths(selection.analysable, selection.unpatched)))
        contents = dict(await context.read(list(wanted))) if wanted else {}
        extends = missing_extends(contents)
        if extends:
            contents.update(await context.read(extends))
        lint = lint_config(contents)

        files: list[FileUnderReview] = []
        not_linted: dict[str, int] = {}  # config file -> files it keeps out of linting
        for changed in selection.analysable:
            content = contents.get(changed.path)
            if content is not None and content.text is not None and looks_generated(content.text):
                skipped.append(Skipped(changed.path, GENERATED_HEADER))
                continue
            exclusion = lint.excluded(changed.path)
            if exclusion is not None:
                skipped.append(Skipped(changed.path, exclusion.reason))
                not_linted[exclusion.source] = not_linted.get(exclusion.source, 0) + 1
            files.append(FileUnderReview(changed, parse_patch(changed.patch), content))
        unpatched = tuple(FileUnderReview(f, PatchLines(), contents.get(f.path)) for f in selection.unpatched)

        # The base side of the changed Python files the base had (the API check compares them).
        base_paths = [
            f.file.previous_path or f.path
            for f in files
            if f.file.status in ("modified", "renamed") and is_python(f.path)
        ]
        read_base = context.read_base
        base = dict(await read_base(base_paths)) if read_base is not None and base_paths else {}
        batch = AnalysisInput(tuple(files), unpatched, contents, settings, tree=tree, lint=lint, base=base)
        outputs: list[AnalyzerOutput] = list(
            await asyncio.gather(*(a.analyse(batch) for a in self.analyzers))
        )

        added = {item.path: item.lines.added for item in files}
        order = {f.path: index for index, f in enumerate(context.files)}
        kept = [
            f
            for output in outputs
            for f in output.findings
            if not f.inline or f.rule in FILE_LEVEL_RULES or f.line in added.get(f.path, ())
        ]
        kept += body_findings(context.title, context.body)  # the PR's own text is added text too
        findings = deduplicate(
            sorted(kept, key=lambda f: (order.get(f.path, len(order)), f.path, f.line, -f.severity, f.rule))
        )
        for output in outputs:
            skipped.extend(output.skipped)
        skipped.sort(key=lambda s: order.get(s.path, len(order)))

        incomplete = any(output.incomplete for output in outputs)
        notes = [
            f"{_plural(count, 'file')} not linted, as `{source}` excludes {'it' if count == 1 else 'them'}"
            for source, count in not_linted.items()
        ]
        notes += [note for output in outputs for note in output.notes]
        if context.files_truncated:
            listed = len(context.files)
            notes.insert(
                0, f"GitHub listed only the first {listed} changed files; the rest were not reviewed"
            )
        analysed = tuple(item.path for item in files)
        return ReviewResult(
            verdict=verdict_for(findings, incomplete=incomplete),
            summary=summarise(
                findings, changed=len(context.files), analysed=analysed, skipped=skipped, notes=notes
            ),
            findings=tuple(findings),
            skipped=tuple(skipped),
            analysed=analysed,
            notes=tuple(notes),
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
