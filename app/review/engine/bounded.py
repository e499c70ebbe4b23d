"""What the built-in reviewer runs inside the execution boundary (``isolation``): every step that
evaluates pull-request content. Each is a job, pickled into a child process, answering with plain
data the engine checks.

- ``ScopeJob``: the lint configuration files (read at the base: the pull request never chooses
  the rules it is judged by), parsed, say which ``extend`` targets to read next and which ruff
  the repository pins (the serving process installs it: the child has no network).
- ``EvaluateJob``: the lint scope (each configuration file's patterns a bounded stage), then every
  analyzer (each a stage), then the findings kept on the lines the pull request changed. A stage
  in ``left_out`` is skipped, and an analyzer is not given the files ``refused`` names for it:
  the engine runs the job again without the files a stage failed on (or, when no file alone
  makes it fail, without the stage).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..analyzers import AnalysisInput, Analyzer, AnalyzerOutput, FileUnderReview, file_level_rules, is_python
from ..analyzers.base import split_rows
from ..analyzers.python import SYNTAX_RULE
from ..core.diff import PatchLines, parse_patch, whole_file
from ..core.differential import Identity, identity, preexisting, scopes
from ..core.lintconfig import (
    EXCLUDES_LOST,
    LintConfig,
    RuffPin,
    forget_matches,
    governing_paths,
    lint_config,
    missing_extends,
)
from ..core.model import ChangedFile, FileContent, Finding, RepoTree, ReviewSettings, SkipCause, Skipped
from ..core.selection import looks_generated
from ..isolation.child import stage
from .inert import code

__all__ = ["GENERATED_HEADER", "EvaluateJob", "Evaluation", "Scope", "ScopeJob", "cap_findings"]

GENERATED_HEADER = "generated (its header says do not edit)"
UNPARSED_AT_BASE = "does not parse, as at the base: only partly analysed"
BASE_LOST = "the findings there were judged as new"
# Findings a review carries, before they are deduplicated: the most severe are kept.
MAX_FINDINGS_PER_FILE = 50
MAX_FINDINGS_PER_REVIEW = 500


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


@dataclass(frozen=True, slots=True)
class Scope:
    extends: tuple[str, ...] = ()  # configuration files ``extend`` names, not read yet
    pin: RuffPin | None = None  # the ruff the repository pins, when it governs an analysed file


@dataclass(frozen=True, slots=True)
class ScopeJob:
    contents: Mapping[str, FileContent | None]
    python_paths: tuple[str, ...] = ()

    def result_type(self) -> type[Scope]:
        return Scope

    async def run(self) -> Scope:
        with stage("configuration", "reading the lint configuration", "it was not used"):
            lint = lint_config(self.contents)
            used = governing_paths(lint, self.python_paths)
            return Scope(tuple(missing_extends(self.contents)), lint.pin if used else None)


@dataclass(frozen=True, slots=True)
class Evaluation:
    analysed: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()  # those on changed lines (and file-level ones), not deduplicated
    skipped: tuple[Skipped, ...] = ()
    notes: tuple[str, ...] = ()
    incomplete: bool = False
    suppressed: tuple[Finding, ...] = ()  # concerns and nits only the PR's own suppressions hide
    preexisting: tuple[Finding, ...] = ()  # would be shown, but stood at the base already
    base_seen: Mapping[str, tuple[Identity, ...]] = field(default_factory=dict)  # sides analysed


@dataclass(slots=True)
class Known:
    """What ``EvaluateJob._compare`` learnt: the findings at head that stood at the base, and the
    base sides it analysed (their findings' identities, by ``base_key``)."""

    old: list[Finding] = field(default_factory=list)
    seen: dict[str, tuple[Identity, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EvaluateJob:
    analyzers: tuple[Analyzer, ...]
    analysable: tuple[ChangedFile, ...]
    unpatched: tuple[ChangedFile, ...]
    contents: Mapping[str, FileContent | None]
    settings: ReviewSettings = field(default_factory=ReviewSettings)
    tree: RepoTree | None = None
    tools: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    title: str = ""
    body: str = ""
    author: str = ""
    pattern_seconds: float = 2.0
    base: Mapping[str, FileContent | None] = field(default_factory=dict)  # base side (the API check)
    left_out: frozenset[str] = frozenset()  # stages not to run (their limit tripped before)
    refused: Mapping[str, frozenset[str]] = field(default_factory=dict)  # stage -> paths it fails on
    configs: Mapping[str, FileContent | None] = field(default_factory=dict)  # lint configs, at the base
    rules_digest: str = ""  # what the findings depend on besides the files (``base_key``)
    base_known: Mapping[str, tuple[Identity, ...]] = field(default_factory=dict)  # by ``base_key``

    def result_type(self) -> type[Evaluation]:
        return Evaluation

    async def run(self) -> Evaluation:
        forget_matches()
        with stage("configuration", "reading the lint configuration", "it was not used"):
            lint = lint_config(self.configs).without(self.left_out)
        paths = [f.path for f in self.analysable]
        for source in lint.pattern_sources():
            with stage(source.key, source.what, EXCLUDES_LOST, seconds=self.pattern_seconds):
                for path in paths:
                    source.check(path)

        files, skipped, not_linted = self._under_review(lint)
        unpatched = tuple(FileUnderReview(f, PatchLines(), self.contents.get(f.path)) for f in self.unpatched)
        batch = AnalysisInput(
            tuple(files),
            unpatched,
            self.contents,
            self.settings,
            tree=self.tree,
            lint=lint,
            tools=self.tools,
            title=self.title,
            body=self.body,
            author=self.author,
            base=self.base,
            configs=self.configs,
        )

        ran, not_run, incomplete = await self._analyse(batch, files)
        outputs = [output for _, output in ran]
        skipped += not_run

        # Kept on the lines the pull request added or changed, unless the rule is file-level;
        # and only what the pull request introduced (``core.differential``).
        file_level = file_level_rules(list(self.analyzers))
        added = {item.path: item.lines.added for item in files}

        def shown(f: Finding) -> bool:
            return not f.inline or f.rule in file_level or f.line in added.get(f.path, ())

        known = await self._compare(ran, batch, shown)
        old = {id(f) for f in known.old}
        kept = [f for output in outputs for f in output.findings if shown(f) and id(f) not in old]
        kept, capped = cap_findings(kept)
        preexisting = [f for f in known.old if shown(f)]
        notes = [
            *lint.scope_problems,
            *(
                f"{_plural(count, 'file')} not linted, as {code(source)}"
                f" excludes {'it' if count == 1 else 'them'}"
                for source, count in not_linted.items()
            ),
            *(note for output in outputs for note in output.notes),
            *capped,
            *preexisting_note(len(preexisting)),
        ]
        unparsed = sorted({f.path for f in preexisting if f.rule == SYNTAX_RULE})
        skipped += [Skipped(path, UNPARSED_AT_BASE) for path in unparsed]
        return Evaluation(
            analysed=tuple(item.path for item in files),
            findings=tuple(kept),
            skipped=(*skipped, *(s for output in outputs for s in output.skipped)),
            notes=tuple(notes),
            incomplete=incomplete or bool(unparsed) or any(output.incomplete for output in outputs),
            suppressed=tuple(
                f
                for output in outputs
                for f in output.suppressed
                if f.line in added.get(f.path, ()) and id(f) not in old
            ),
            preexisting=tuple(preexisting),
            base_seen=known.seen,
        )

    def _under_review(self, lint: LintConfig) -> tuple[list[FileUnderReview], list[Skipped], dict[str, int]]:
        """The files to analyse, those left out (generated) or not linted (the base's lint
        scope: the repository's choice), and how many each configuration file kept out."""
        skipped: list[Skipped] = []
        files: list[FileUnderReview] = []
        not_linted: dict[str, int] = {}  # config file -> files it keeps out of linting
        for changed in self.analysable:
            content = self.contents.get(changed.path)
            if content is not None and content.text is not None and looks_generated(content.text):
                skipped.append(Skipped(changed.path, GENERATED_HEADER))
                continue
            exclusion = lint.excluded(changed.path)
            if exclusion is not None:
                skipped.append(Skipped(changed.path, exclusion.reason, SkipCause.REPOSITORY))
                not_linted[exclusion.source] = not_linted.get(exclusion.source, 0) + 1
            files.append(FileUnderReview(changed, parse_patch(changed.patch), content))
        return files, skipped, not_linted

    async def _compare(
        self,
        ran: Sequence[tuple[Analyzer, AnalyzerOutput]],
        batch: AnalysisInput,
        shown: Callable[[Finding], bool],
    ) -> Known:
        """The findings at head that stood at the base: for each differential analyzer, the files
        where it found something the review would show are analysed again at their base side
        (from ``base_known`` where the same side was analysed under the same rules before), and
        their findings matched. A base side whose stage trips is not compared: its findings are
        judged as if new, never the other way."""
        known = Known()
        for analyzer, output in ran:
            if not analyzer.differential or f"base:{analyzer.name}" in self.left_out:
                continue
            wanted = {f.path for f in (*output.findings, *output.suppressed) if shown(f)}
            sides = {
                item.path: side for item in batch.files if item.path in wanted and (side := self._side(item))
            }
            if not sides:
                continue
            keys = {
                path: base_key(self.rules_digest, analyzer.name, path, side) for path, side in sides.items()
            }
            missing = [path for path in sides if keys[path] not in self.base_known]
            if missing:
                with stage(f"base:{analyzer.name}", f"the {analyzer.name} checks at the base", BASE_LOST):
                    found = await analyzer.analyse(base_batch(batch, {p: sides[p] for p in missing}))
                for path in missing:
                    rows = split_rows(sides[path].text)
                    of_path = [f for f in (*found.findings, *found.suppressed) if f.path == path]
                    spans = scopes(rows, python=is_python(path))
                    known.seen[keys[path]] = tuple(identity(f, spans) for f in of_path)
            for path in sides:
                ids = known.seen[keys[path]] if keys[path] in known.seen else self.base_known[keys[path]]
                item = next(i for i in batch.files if i.path == path)
                spans = scopes(item.rows, python=is_python(path))
                for group in (output.findings, output.suppressed):
                    mine = [f for f in group if f.path == path]
                    flags = preexisting(mine, spans, ids, touched=item.lines.added)
                    known.old += [f for f, old in zip(mine, flags, strict=True) if old]
        return known

    def _side(self, item: FileUnderReview) -> FileContent | None:
        """The base side of a changed file, when it has one that can be analysed."""
        side = self.base.get(item.file.previous_path or item.path)
        return side if side is not None and side.text is not None else None

    async def _analyse(
        self, batch: AnalysisInput, files: Sequence[FileUnderReview]
    ) -> tuple[list[tuple[Analyzer, AnalyzerOutput]], list[Skipped], bool]:
        """Every analyzer in its stage, but those left out, each without the files it failed on
        before: their outputs, the files an analyzer did not check, and whether any did not."""
        outputs: list[tuple[Analyzer, AnalyzerOutput]] = []
        skipped: list[Skipped] = []
        incomplete = False
        for analyzer in self.analyzers:
            key = f"analyzer:{analyzer.name}"
            if key in self.left_out:  # its files were not (fully) checked: a thread on them stays open
                incomplete = True
                skipped += [Skipped(item.path, f"the {analyzer.name} checks were not run") for item in files]
                continue
            refused = self.refused.get(key, frozenset())
            if refused:  # the files it failed on: not analysed by it, every other file is
                incomplete = True
                skipped += [
                    Skipped(path, f"not analysed by the {analyzer.name} checks: they failed on this file")
                    for path in sorted(refused)
                ]
            with stage(key, f"the {analyzer.name} checks", "they were not run"):
                outputs.append((analyzer, await analyzer.analyse(without(batch, refused))))
        return outputs, skipped, incomplete


def preexisting_note(count: int) -> list[str]:
    """What the summary says of the findings that stood at the base (none: nothing)."""
    if not count:
        return []
    were = "was" if count == 1 else "were"
    return [
        f"{_plural(count, 'finding')} on lines this pull request touched {were} already there at the base"
    ]


def base_key(rules: str, analyzer: str, path: str, side: FileContent) -> str:
    """What an analyzer's findings on one base side depend on: the rules of the review (its
    configuration, tools and settings: ``EvaluateJob.rules_digest``), the analyzer, the path
    and the text. The same side under the same rules is analysed once, across rounds and pull
    requests."""
    text = side.text or ""
    return hashlib.sha256(f"{rules}\0{analyzer}\0{path}\0{text}".encode()).hexdigest()


def base_batch(batch: AnalysisInput, sides: Mapping[str, FileContent]) -> AnalysisInput:
    """``batch`` narrowed to the files in ``sides``, each with its base text at its head path (the
    same rules apply to it) and shown as wholly added, so every analyzer reports on all of it."""
    files = tuple(
        FileUnderReview(
            item.file,
            whole_file(
                split_rows(sides[item.path].text),
                newline_at_end=(sides[item.path].text or "\n").endswith("\n"),
            ),
            sides[item.path],
        )
        for item in batch.files
        if item.path in sides
    )
    return replace(batch, files=files, unpatched=(), contents={**batch.contents, **sides}, at_base=True)


def without(batch: AnalysisInput, refused: frozenset[str]) -> AnalysisInput:
    """``batch`` without the files in ``refused`` (an analyzer failed on each of them alone)."""
    if not refused:
        return batch
    return replace(
        batch,
        files=tuple(f for f in batch.files if f.path not in refused),
        unpatched=tuple(f for f in batch.unpatched if f.path not in refused),
    )


def cap_findings(
    findings: Sequence[Finding],
    *,
    per_file: int = MAX_FINDINGS_PER_FILE,
    per_review: int = MAX_FINDINGS_PER_REVIEW,
) -> tuple[list[Finding], list[str]]:
    """At most ``per_file`` findings of a file and ``per_review`` in all, the most severe first,
    in their order; and a note for each cut. Pure."""
    ranked = sorted(range(len(findings)), key=lambda i: -findings[i].severity)
    of_file: Counter[str] = Counter()
    beyond_file: Counter[str] = Counter()
    beyond_review = 0
    keep: set[int] = set()
    for index in ranked:
        path = findings[index].path
        if of_file[path] >= per_file:
            beyond_file[path] += 1
        elif len(keep) >= per_review:
            beyond_review += 1
        else:
            of_file[path] += 1
            keep.add(index)
    notes = [
        f"{_plural(count, 'more finding')} in {code(path)} not listed"
        f" (at most {per_file} a file: the most severe)"
        for path, count in beyond_file.items()
    ]
    if beyond_review:
        notes.append(
            f"{_plural(beyond_review, 'more finding')} not listed "
            f"(at most {per_review} a review: the most severe)"
        )
    return [f for index, f in enumerate(findings) if index in keep], notes
