"""The built-in reviewer end to end over a pull-request context: selection, the single content
read, filtering to changed lines, deduplication, verdict and summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

import pytest

from app.review.analyzers import AnalysisInput, AnalyzerOutput, Rule, default_analyzers
from app.review.core.model import (
    ChangedFile,
    FileContent,
    Finding,
    PullContext,
    RepoTree,
    Reviewer,
    ReviewSettings,
    Severity,
    SkipCause,
    Skipped,
    Verdict,
)
from app.review.core.selection import (
    PATCH_OMITTED,
    glob_match,
    looks_generated,
    matching_pattern,
    select_files,
)
from app.review.engine.bounded import Evaluation, cap_findings
from app.review.engine.builtin import (
    MAX_CONFIG_CANDIDATES,
    MAX_CONFIG_DEPTH,
    MAX_PROBES,
    BuiltinReviewer,
    base_config_paths,
    capped_configs,
    deduplicate,
    incomplete_analysis,
    summarise,
    verdict_for,
)
from app.review.isolation.limits import Budget, Job, Limits, Tripped
from app.review.isolation.pool import ProcessPool
from tests.isolation_jobs import Explode, Stall
from tests.test_review_analyzers import changed, ruff_version_text

DEFAULT_RUFF_NOTE = (
    f"Python checked by ruff {ruff_version_text()} with revbot's default rules (E9, F); "
    "likely-bug checks (T10, PLE, B006, B015, B018) run"
)
# With a modified public module: its base side is rebuilt from the patch, no base reader needed.
API_NOTE = DEFAULT_RUFF_NOTE.replace("; likely", "; public API compared with the base in 1 module; likely")


class RecordingReader:
    """A stand-in for the content reader (an input of the engine) that records every call."""

    def __init__(self, files: Mapping[str, str | FileContent] | None = None) -> None:
        self.files = dict(files or {})
        self.calls: list[list[str]] = []

    async def __call__(self, paths: Sequence[str]) -> Mapping[str, FileContent | None]:
        self.calls.append(list(paths))
        out: dict[str, FileContent | None] = {}
        for path in paths:
            found = self.files.get(path)
            out[path] = FileContent(found, len(found.encode())) if isinstance(found, str) else found
        return out


def pull(
    files: Sequence[ChangedFile],
    reader: RecordingReader | None = None,
    *,
    settings: ReviewSettings | None = None,
    truncated: bool = False,
    tree: RepoTree | None = None,
) -> PullContext:
    """A context whose repository holds the changed files and what ``reader`` knows (unless
    ``tree`` says otherwise)."""
    reader = reader or RecordingReader()
    layout = tree or RepoTree.of({*reader.files, *(f.path for f in files if f.status != "removed")})

    async def list_tree() -> RepoTree:
        return layout

    return PullContext(
        repo="octo/widgets",
        pr_number=7,
        title="Change things",
        author_login="alice",
        base_sha="a" * 40,
        head_sha="b" * 40,
        files=tuple(files),
        read=reader,
        settings=settings or ReviewSettings(),
        files_truncated=truncated,
        tree=list_tree,
    )


def located(findings: Sequence[Finding]) -> set[tuple[str, str, int]]:
    return {(f.path, f.rule, f.line) for f in findings}


# --- the acceptance pull request ----------------------------------------------------------------

APP_BASE = "import os\n\n\ndef handler():\n    return os.getcwd()\n"
APP_HEAD = (
    "import os\n\n\ndef handler():\n    return os.getcwd()\n\n\n"
    "def compute():\n    return undefined_thing + 1\n\n\n"
    "def debug():\n    breakpoint()\n    return os.getcwd()\n"
)
BROKEN = "import os\n\ndef run(:\n    pass\n"
README_BASE = "# widgets\n\nSome text.\n"
README_HEAD = "# widgets\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> feature\n\nSome text.\n"


async def test_the_acceptance_pull_request_requests_changes(private_key_pem: str) -> None:
    files = [
        changed("src/app.py", APP_BASE, APP_HEAD),
        changed("src/broken.py", None, BROKEN),
        changed("deploy/key.pem", None, private_key_pem),
        changed("README.md", README_BASE, README_HEAD),
    ]
    reader = RecordingReader({"src/app.py": APP_HEAD, "src/broken.py": BROKEN})
    result = await BuiltinReviewer().review(pull(files, reader))

    assert result.verdict is Verdict.REQUEST_CHANGES
    assert located(result.findings) == {
        ("src/app.py", "python/F821", 9),
        ("src/app.py", "debug/breakpoint", 13),
        ("src/broken.py", "python/syntax-error", 3),
        ("deploy/key.pem", "secrets/private-key", 1),
        ("README.md", "conflict-marker", 2),
        ("README.md", "conflict-marker", 4),
        ("README.md", "conflict-marker", 6),
    }
    severities = {(f.rule, f.severity) for f in result.findings}
    assert ("debug/breakpoint", Severity.CONCERN) in severities
    assert {s for r, s in severities if r != "debug/breakpoint"} == {Severity.BLOCKER}
    [bp] = [f for f in result.findings if f.rule == "debug/breakpoint"]
    assert bp.suggestion == ""
    assert reader.calls == [["src/app.py", "src/broken.py"]]  # no config file in the tree
    assert result.analysed == ("src/app.py", "src/broken.py", "deploy/key.pem", "README.md")
    assert result.skipped == ()
    assert result.summary == f"6 blockers, 1 concern in 4 of 4 changed files. {API_NOTE}."
    assert [f.path for f in result.findings] == sorted(
        (f.path for f in result.findings), key=[x.path for x in files].index
    )


def test_the_builtin_reviewer_is_a_reviewer() -> None:
    reviewer: Reviewer = BuiltinReviewer()
    assert hasattr(reviewer, "review")


# --- only what the pull request changed ----------------------------------------------------------


async def test_findings_only_on_changed_lines_but_syntax_errors_anywhere() -> None:
    old_names = "import os\n\n\ndef f():\n    return missing_before\n"
    new_names = old_names + "\n\ndef g():\n    return os.sep\n"
    # The change removes a closing bracket: the error is reported on a line it did not touch.
    old_syntax = "x = [\n    1,\n]\n\n\n\n\ny = 2\n"
    new_syntax = "x = [\n    1,\n\n\n\n\ny = 2\n"
    files = [changed("a.py", old_names, new_names), changed("b.py", old_syntax, new_syntax)]
    reader = RecordingReader({"a.py": new_names, "b.py": new_syntax})
    result = await BuiltinReviewer().review(pull(files, reader))
    assert {(path, rule) for path, rule, _ in located(result.findings)} == {("b.py", "python/syntax-error")}
    assert result.verdict is Verdict.REQUEST_CHANGES


async def test_a_syntax_error_that_stood_at_the_base_is_not_the_pull_requests() -> None:
    """Counted, never a blocker; and the file, which cannot be wholly analysed, is not approved."""
    old_syntax = "def f(:\n    pass\n\n\n\n\n\nx = 1\n"
    new_syntax = old_syntax + "y = 2\n"
    reader = RecordingReader({"b.py": new_syntax})
    result = await BuiltinReviewer().review(pull([changed("b.py", old_syntax, new_syntax)], reader))
    assert result.findings == ()
    assert [(f.path, f.rule) for f in result.preexisting] == [("b.py", "python/syntax-error")]
    assert "1 finding on lines this pull request touched was already there at the base" in result.summary
    assert ("b.py", "does not parse, as at the base: only partly analysed") in {
        (s.path, s.reason) for s in result.skipped
    }
    assert result.incomplete and result.verdict is Verdict.COMMENT


# --- verdicts -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "added", "verdict"),
    [
        ("src/a.js", "const x = 1;\n", Verdict.APPROVE),
        ("src/a.js", "console.log(x);\n", Verdict.COMMENT),
        ("src/a.js", "debugger;\n", Verdict.COMMENT),
        ("src/a.js", "<<<<<<< HEAD\n", Verdict.REQUEST_CHANGES),
        ("notes.txt", "trailing \n", Verdict.COMMENT),
    ],
)
async def test_verdicts(path: str, added: str, verdict: Verdict) -> None:
    reader = RecordingReader()
    result = await BuiltinReviewer().review(pull([changed(path, "start\n", "start\n" + added)], reader))
    assert result.verdict is verdict
    assert reader.calls == []  # nothing needed reading


async def test_a_clean_python_change_is_approved() -> None:
    new = "import os\n\n\ndef here() -> str:\n    return os.getcwd()\n"
    result = await BuiltinReviewer().review(
        pull([changed("m.py", None, new)], RecordingReader({"m.py": new}))
    )
    assert result.verdict is Verdict.APPROVE
    assert result.findings == ()
    assert result.summary == f"No findings in 1 analysed file. {DEFAULT_RUFF_NOTE}."


def test_verdict_for() -> None:
    def of(severity: Severity) -> Finding:
        return Finding("p", 1, severity, "r", "m", "f")

    assert verdict_for([]) is Verdict.APPROVE
    assert verdict_for([], incomplete=True) is Verdict.COMMENT
    assert verdict_for([of(Severity.NIT)]) is Verdict.COMMENT
    assert verdict_for([of(Severity.CONCERN), of(Severity.NIT)]) is Verdict.COMMENT
    assert verdict_for([of(Severity.NIT), of(Severity.BLOCKER)]) is Verdict.REQUEST_CHANGES


class _Unfinished:
    name = "unfinished"
    tools: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    differential: bool = False

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        return []

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        return AnalyzerOutput(
            skipped=[Skipped(batch.files[0].path, "Python checks not run: ruff timed out after 60 s")],
            notes=["Python checks could not run (ruff timed out after 60 s)"],
            incomplete=True,
        )


@pytest.mark.slow
async def test_a_check_that_could_not_run_prevents_approval() -> None:
    result = await BuiltinReviewer([_Unfinished()]).review(pull([changed("m.py", None, "x = 1\n")]))
    assert result.verdict is Verdict.COMMENT
    assert result.summary == (
        "No findings in 1 analysed file. Python checks could not run (ruff timed out after 60 s)."
    )


# --- selection and the single read -------------------------------------------------------------


async def test_selection_and_one_read_of_only_the_needed_paths() -> None:
    generated = "# Code generated by protoc-gen-foo. DO NOT EDIT.\nx = undefined\n"
    files = [
        changed("src/main.py", "a = 1\n", "a = 1\nb = 2\n"),
        changed("src/gen_api.py", None, generated),
        changed("src/web.js", None, "let x = 1;\n"),
        changed("docs/guide.md", None, "# Guide\n"),
        changed("poetry.lock", None, "content-hash = 1\n"),
        changed("web/package-lock.json", None, "{}\n"),
        changed("vendor/lib/x.py", None, "x = undefined\n"),
        changed("ui/node_modules/a/index.js", None, "debugger;\n"),
        changed("api/proto/api_pb2.py", None, "x = undefined\n"),
        changed("static/app.min.js", None, "debugger;\n"),
        changed("packages/a/dist/index.js", None, "debugger;\n"),
        ChangedFile("old.py", "removed", "@@ -1 +0,0 @@\n-x = 1", 0, 1),
        ChangedFile("assets/logo.png", "added", None, 0, 0),
        ChangedFile("data/huge.csv", "added", None, 9000, 0),
        ChangedFile("src/renamed.py", "renamed", None, 0, 0, previous_path="src/original.py"),
    ]
    reader = RecordingReader(
        {
            "src/main.py": "a = 1\nb = 2\n",
            "src/gen_api.py": generated,
            "assets/logo.png": FileContent(None, 4096, is_binary=True),
        }
    )
    result = await BuiltinReviewer().review(
        pull(files, reader, settings=ReviewSettings(paths_ignore=("docs/**",)))
    )

    assert reader.calls == [["src/main.py", "src/gen_api.py", "assets/logo.png"]]
    assert result.analysed == ("src/main.py", "src/web.js")
    assert list(result.skipped) == [
        Skipped("src/gen_api.py", "generated (its header says do not edit)"),
        Skipped("docs/guide.md", "ignored by review.paths_ignore (`docs/**`)", SkipCause.REPOSITORY),
        Skipped("poetry.lock", "lock file (`*.lock`)"),
        Skipped("web/package-lock.json", "lock file (`package-lock.json`)"),
        Skipped("vendor/lib/x.py", "vendored (`vendor/`)"),
        Skipped("ui/node_modules/a/index.js", "vendored (`node_modules/`)"),
        Skipped("api/proto/api_pb2.py", "generated (`*_pb2.py`)"),
        Skipped("static/app.min.js", "generated (`*.min.js`)"),
        Skipped("packages/a/dist/index.js", "generated (`dist/`)"),
        Skipped("old.py", "file removed", SkipCause.NOTHING),
        Skipped("assets/logo.png", PATCH_OMITTED),
        Skipped("data/huge.csv", PATCH_OMITTED),
        Skipped("src/renamed.py", "renamed without changes", SkipCause.NOTHING),
    ]
    assert located(result.findings) == {
        ("assets/logo.png", "hygiene/binary-file", 1),
        ("data/huge.csv", "hygiene/large-file", 1),
    }
    assert result.verdict is Verdict.COMMENT
    assert result.summary == f"2 nits in 2 of 15 changed files; 13 files skipped. {API_NOTE}."


async def test_max_files_analyses_the_first_files_in_order() -> None:
    files = [changed(f"src/f{n}.js", None, "console.log(1);\n") for n in range(5)]
    files.insert(1, changed("yarn.lock", None, "x\n"))  # skipped anyway: does not use up the budget
    result = await BuiltinReviewer().review(pull(files, settings=ReviewSettings(max_files=3)))
    assert result.analysed == ("src/f0.js", "src/f1.js", "src/f2.js")
    assert list(result.skipped) == [
        Skipped("yarn.lock", "lock file (`*.lock`)"),
        Skipped("src/f3.js", "over the limit of 3 files (review.max_files)"),
        Skipped("src/f4.js", "over the limit of 3 files (review.max_files)"),
    ]
    assert {f.path for f in result.findings} == {"src/f0.js", "src/f1.js", "src/f2.js"}


async def test_a_truncated_file_list_is_said_in_the_summary() -> None:
    result = await BuiltinReviewer().review(pull([changed("a.txt", None, "x\n")], truncated=True))
    assert result.summary == (
        "No findings in 1 analysed file. GitHub listed only the first 1 changed files; "
        "the rest were not reviewed."
    )


async def test_nothing_analysed_is_never_approved() -> None:
    result = await BuiltinReviewer().review(pull([]))
    assert (result.verdict, result.summary) == (Verdict.COMMENT, "No changed files to review.")
    only_skipped = await BuiltinReviewer().review(pull([ChangedFile("gone.py", "removed", None)]))
    assert (only_skipped.verdict, only_skipped.summary) == (
        Verdict.COMMENT,
        "Nothing analysed: 1 file skipped.",
    )
    assert result.incomplete and only_skipped.incomplete


BY_PR = Skipped("vendor/x.py", "vendored (`vendor/`)")
BY_REPO = Skipped("docs/a.md", "ignored by review.paths_ignore (`docs/**`)", SkipCause.REPOSITORY)
GONE = Skipped("old.py", "file removed", SkipCause.NOTHING)


@pytest.mark.parametrize(
    ("evaluation", "skipped", "truncated", "incomplete"),
    [
        (Evaluation(analysed=("a.py",)), [], False, False),
        (Evaluation(analysed=("a.py",)), [BY_REPO, GONE], False, False),  # the repository's choice
        (Evaluation(analysed=("a.py",)), [BY_PR], False, True),  # a name the pull request chose
        (Evaluation(analysed=("a.py",), incomplete=True), [], False, True),  # a check did not run
        (Evaluation(analysed=("a.py",)), [], True, True),  # GitHub listed only part of the files
        (Evaluation(), [GONE], False, True),  # nothing analysed at all
    ],
)
def test_which_analyses_are_incomplete(
    evaluation: Evaluation, skipped: list[Skipped], truncated: bool, incomplete: bool
) -> None:
    assert incomplete_analysis(evaluation, skipped, truncated=truncated) is incomplete


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.lock", "a/b/c.lock", True),
        ("*.md", "README.md", True),
        ("docs/**", "docs/a/b.md", True),
        ("docs/**", "src/docs/a.md", False),
        ("docs/*", "docs/a/b.md", True),  # docs/a is matched, and everything below it
        ("docs/", "src/docs/a.md", True),
        ("/docs", "src/docs/a.md", False),
        ("**/fixtures/*.json", "tests/unit/fixtures/a.json", True),
        ("**/fixtures/*.json", "fixtures/a.json", True),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/pkg/a.py", False),
        ("src/**/*.py", "src/a.py", True),
        ("test_?.py", "pkg/test_1.py", True),
        ("[!a]*.txt", "b.txt", True),
        ("[!a]*.txt", "a.txt", False),
        ("vendor/", "vendors/x.go", False),
        ("*.generated.*", "src/api.generated.ts", True),
        ("", "a", False),
    ],
)
def test_glob_patterns(pattern: str, path: str, matches: bool) -> None:
    assert glob_match(pattern, path) is matches


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("src/*.py", "src/pkg/a.py", True),  # fnmatch's reading: * crosses /
        ("docs/**", "docs/a.md", True),
        ("*.snap", "tests/__snapshots__/a.snap", True),
        ("docs/**", "src/docs/a.md", False),
        ("  ", "a.py", False),
    ],
)
def test_paths_ignore_accepts_both_readings(pattern: str, path: str, matches: bool) -> None:
    assert (matching_pattern([pattern], path) is not None) is matches


def test_selection_is_pure_and_ordered() -> None:
    files = [
        ChangedFile("a.py", "modified", "@@ -1 +1 @@\n-a\n+b", 1, 1),
        ChangedFile("b.bin", "added", None),
    ]
    selection = select_files(files, paths_ignore=(), max_files=1)
    assert [f.path for f in selection.analysable] == ["a.py"]
    assert [f.path for f in selection.unpatched] == ["b.bin"]


@pytest.mark.parametrize(
    ("text", "generated"),
    [
        ("# Code generated by protoc-gen-go. DO NOT EDIT.\n", True),
        ('"""Generated by the protocol buffer compiler.  DO NOT EDIT!"""\n', True),
        ("#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n# @generated\n", True),
        ("\n\n\n\n\n# autogenerated file, do not modify\n", False),  # line 6: too late
        ("# This module generates reports.\n# Please edit freely.\n", False),
    ],
)
def test_generated_headers(text: str, generated: bool) -> None:
    assert looks_generated(text) is generated


# --- fingerprints and deduplication --------------------------------------------------------------


async def test_fingerprints_survive_line_shifts_and_repeats_stay_distinct() -> None:
    base = "start();\n"
    first = await BuiltinReviewer().review(
        pull([changed("a.js", base, base + "debugger;\nx();\n  debugger;\n")])
    )
    shifted = await BuiltinReviewer().review(
        pull([changed("a.js", base, "one();\ntwo();\n" + base + "debugger;\nx();\n  debugger;\n")])
    )
    assert [f.line for f in first.findings] == [2, 4]
    assert [f.line for f in shifted.findings] == [4, 6]
    assert [f.fingerprint for f in first.findings] == [f.fingerprint for f in shifted.findings]
    assert len({f.fingerprint for f in first.findings}) == 2


async def test_two_findings_of_one_rule_on_one_line_merge() -> None:
    new = "def f():\n    return alpha + beta\n"
    result = await BuiltinReviewer().review(
        pull([changed("m.py", None, new)], RecordingReader({"m.py": new}))
    )
    [merged] = result.findings
    assert merged.rule == "python/F821" and "alpha" in merged.message and "beta" in merged.message


class Line(int):
    """A line number that counts how often it is compared."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        Line.compared += 1
        return int(self) == other

    __hash__ = int.__hash__


def test_deduplicating_the_same_finding_on_20000_lines_is_one_pass() -> None:
    """The same flagged text on every line of a file: each line stays a finding of its own,
    numbered, and no line is compared with the others (it was, pairwise: 20,000 took 10 s)."""
    count = 20_000
    findings = [
        Finding("m.py", Line(n), Severity.BLOCKER, "python/F821", "x", "same") for n in range(1, count + 1)
    ]
    Line.compared = 0
    out = deduplicate(findings)
    assert [f.line for f in out] == list(range(1, count + 1))
    assert len({f.fingerprint for f in out}) == count and out[0].fingerprint == "same"
    assert Line.compared <= count  # one look-up each, not a scan of the lines before


def test_deduplicating_merges_the_messages_of_one_line_once() -> None:
    def on(line: int, message: str, severity: Severity = Severity.NIT) -> Finding:
        return Finding("m.py", line, severity, "python/F821", message, "fp", suggestion="s")

    out = deduplicate([on(1, "a"), on(1, "b", Severity.BLOCKER), on(1, "a"), on(2, "a"), on(1, "b")])
    assert [(f.line, f.message, f.severity, f.fingerprint == "fp") for f in out] == [
        (1, "a; b", Severity.BLOCKER, True),
        (2, "a", Severity.NIT, False),
    ]


def _finding(path: str, line: int, severity: Severity) -> Finding:
    return Finding(path, line, severity, "r", "m", f"{path}{line}")


@pytest.mark.parametrize(
    ("found", "per_file", "per_review", "kept", "notes"),
    [
        ([("a", 1, Severity.NIT), ("a", 2, Severity.NIT)], 2, 5, [("a", 1), ("a", 2)], []),
        (  # the most severe are kept, in their order
            [
                ("a", 1, Severity.NIT),
                ("a", 2, Severity.NIT),
                ("a", 3, Severity.BLOCKER),
                ("b", 1, Severity.NIT),
            ],
            2,
            5,
            [("a", 1), ("a", 3), ("b", 1)],
            ["1 more finding in `a` not listed (at most 2 a file: the most severe)"],
        ),
        (
            [
                ("a", 1, Severity.NIT),
                ("b", 1, Severity.CONCERN),
                ("c", 1, Severity.NIT),
                ("c", 2, Severity.NIT),
            ],
            5,
            2,
            [("a", 1), ("b", 1)],
            ["2 more findings not listed (at most 2 a review: the most severe)"],
        ),
    ],
)
def test_findings_are_capped_per_file_and_per_review(
    found: list[tuple[str, int, Severity]],
    per_file: int,
    per_review: int,
    kept: list[tuple[str, int]],
    notes: list[str],
) -> None:
    findings = [_finding(*f) for f in found]
    capped, said = cap_findings(findings, per_file=per_file, per_review=per_review)
    assert [(f.path, f.line) for f in capped] == kept
    assert said == notes


R = TypeVar("R")


class Counting:
    """The real pool, with every job it runs and the budget it ran against recorded."""

    def __init__(self, pool: ProcessPool) -> None:
        self.pool = pool
        self.jobs: list[str] = []
        self.budgets: list[Budget | None] = []

    @property
    def limits(self) -> Limits:
        return self.pool.limits

    async def run(self, job: Job[R], budget: Budget | None = None) -> R | Tripped:
        self.jobs.append(type(job).__name__)
        self.budgets.append(budget)
        return await self.pool.run(job, budget)


@pytest.mark.slow
async def test_a_30000_line_file_is_reviewed_within_the_review_budget() -> None:
    """60 KB, every line an undefined name (it used 246 s of child time: each diagnostic split
    the whole file again, and the tripped job ran again): one job, within the budget."""
    text = "a\n" * 30_000
    boundary = Counting(ProcessPool(Limits(workers=1)))
    try:
        result = await BuiltinReviewer(boundary=boundary).review(
            pull([changed("m.py", None, text)], RecordingReader({"m.py": text}))
        )
    finally:
        boundary.pool.close()
    assert boundary.jobs == ["ScopeJob", "EvaluateJob"]  # nothing tripped, nothing ran again
    budget = boundary.budgets[0]  # one for the review, counting the child time of both
    assert budget is not None and all(b is budget for b in boundary.budgets)
    assert budget.jobs == 2 and budget.spent <= budget.seconds
    assert not result.incomplete and result.verdict is Verdict.REQUEST_CHANGES
    assert len(result.findings) == 50  # the cap of a file, the blockers first
    assert {f.rule for f in result.findings} == {"python/F821"}
    assert "more findings in `m.py` not listed (at most 50 a file: the most severe)" in result.summary


@pytest.mark.slow
async def test_the_review_budget_ends_the_analysis_and_lists_every_file_as_not_analysed() -> None:
    """A job that does not end is stopped when the review's budget is spent, not at the job's
    deadline, and is not run again: the files are listed as not analysed, naming the budget."""
    boundary = Counting(ProcessPool(Limits(workers=1, deadline_seconds=600, budget_seconds=1)))
    files = [changed("m.py", None, "x = 1\n"), changed("README.md", None, "# r\n")]
    try:
        result = await BuiltinReviewer([Stall(), *default_analyzers()], boundary=boundary).review(
            pull(files, RecordingReader({"m.py": "x = 1\n"}))
        )
    finally:
        boundary.pool.close()
    assert boundary.jobs == ["ScopeJob", "EvaluateJob"]
    spent = "not analysed: the review's analysis budget of 1 s was spent"
    assert {s.path: s.reason for s in result.skipped} == {"m.py": spent, "README.md": spent}
    assert result.incomplete and result.analysed == () and result.verdict is not Verdict.APPROVE
    assert "stall checks reached the review's analysis budget of 1 s" in result.summary


def test_summary_wording() -> None:
    def of(path: str, severity: Severity) -> Finding:
        return Finding(path, 1, severity, "r", "m", path + severity.name)

    findings = [of("a", Severity.BLOCKER), of("a", Severity.BLOCKER), of("b", Severity.CONCERN)]
    findings += [of("c", Severity.NIT), of("c", Severity.NIT), of("d", Severity.NIT)]
    skipped = [Skipped("x", "file removed"), Skipped("y", "file removed")]
    text = summarise(findings, changed=6, analysed=["a", "b", "c", "d"], skipped=skipped)
    assert text == "2 blockers, 1 concern, 3 nits in 4 of 6 changed files; 2 files skipped."


@pytest.mark.slow
@pytest.mark.parametrize("count", [1, 2, 7, 40])
async def test_a_stage_that_fails_on_one_file_runs_again_without_it(count: int) -> None:
    """Every other file's findings stand; the file is listed as not analysed by that analyzer,
    and the analysis is incomplete (never approved). The halving is bounded."""
    names = [f"src/m{n}.py" for n in range(count)]
    texts = {name: "x = 1\n" for name in names} | {"src/bad.py": "y = 2\n", "src/app.py": "z = missing\n"}
    files = [changed(path, None, text) for path, text in texts.items()]
    boundary = Counting(ProcessPool(Limits(workers=1)))
    try:
        result = await BuiltinReviewer(
            [Explode("src/bad.py"), *default_analyzers()], boundary=boundary
        ).review(pull(files, RecordingReader(texts)))
    finally:
        boundary.pool.close()
    assert ("src/app.py", "python/F821", 1) in located(result.findings)
    refused = [s for s in result.skipped if "explode" in s.reason]
    assert [(s.path, s.reason) for s in refused] == [
        ("src/bad.py", "not analysed by the explode checks: they failed on this file")
    ]
    assert result.incomplete and result.verdict is Verdict.REQUEST_CHANGES
    probes = boundary.jobs.count("EvaluateJob") - 2  # the first run and the run without it
    assert 1 <= probes <= MAX_PROBES


@pytest.mark.slow
async def test_a_stage_that_fails_on_every_file_alone_is_left_out_whole() -> None:
    """Nothing in the files makes it fail (a tool that cannot start): the stage is left out, with
    its note, rather than each file blamed."""
    texts = {"src/bad.py": "y = 2\n"}
    boundary = Counting(ProcessPool(Limits(workers=1)))
    try:
        result = await BuiltinReviewer(
            [Explode("src/bad.py"), *default_analyzers()], boundary=boundary
        ).review(pull([changed("src/bad.py", None, "y = 2\n")], RecordingReader(texts)))
    finally:
        boundary.pool.close()
    assert result.incomplete and result.verdict is not Verdict.APPROVE
    assert "the explode checks failed (ValueError); they were not run" in result.summary


def test_lint_configuration_candidates_are_capped_in_number_and_depth() -> None:
    """A listing cut short makes every candidate on every path one to read: 300 files 60
    directories deep would be 72,005 paths. The shallowest are kept, and the review says so."""
    deep = ["/".join(f"d{n}_{level}" for level in range(60)) + f"/m{n}.py" for n in range(300)]
    wanted = base_config_paths(deep, RepoTree(frozenset(deep), truncated=True), [])
    assert len(wanted) > 50_000
    kept, note = capped_configs(wanted)
    assert len(kept) <= MAX_CONFIG_CANDIDATES
    assert all(p.count("/") <= MAX_CONFIG_DEPTH for p in kept)
    assert "pyproject.toml" in kept and ".pre-commit-config.yaml" in kept  # the root's first
    assert note is not None and note.startswith(
        f"{len(wanted) - len(kept)} lint configuration candidates not read"
    )
    shallow = ["src/a.py", "src/b.py"]
    assert capped_configs(base_config_paths(shallow, None, [])) == (
        base_config_paths(shallow, None, []),
        None,
    )


@pytest.mark.slow
async def test_a_review_reads_at_most_its_byte_limit_and_says_what_it_left_out() -> None:
    texts = {"src/app.py": "def f():\n    return missing\n", "src/big.py": "x = 1\n" * 40}
    files = [changed(path, None, text) for path, text in texts.items()]
    boundary = ProcessPool(Limits(workers=1, review_bytes=100))
    try:
        result = await BuiltinReviewer(boundary=boundary).review(pull(files, RecordingReader(texts)))
    finally:
        boundary.close()
    assert ("src/app.py", "python/F821", 2) in located(result.findings)
    assert [(s.path, s.reason) for s in result.skipped] == [
        ("src/big.py", "not analysed: past the review's limit of 100 bytes of files")
    ]
    assert result.incomplete and result.verdict is Verdict.REQUEST_CHANGES
