"""A finding's identity across rounds and a re-review's scope: the pure decisions, table-driven
(``app.review.rounds.identity``, and where the renderer, the thread check and overruling use them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from app.review.analyzers import finding as make_finding
from app.review.core.model import Finding, ReviewResult, Severity, Skipped, ThreadStatus, Verdict
from app.review.engine.builtin import deduplicate
from app.review.output import render
from app.review.rounds.decide import last_reviewed_head, thread_status
from app.review.rounds.identity import Delta, Scope, delta_of, held, in_delta, matches, renames_in
from app.review.rounds.markers import FindingMarker, ReviewMarker, Trigger, problem_key
from app.review.rounds.overrule import Overrule, withdraw

OLD, NEW = "a" * 40, "b" * 40
TEXT = "    return undefined_thing + 1"


def found(path: str = "src/app.py", line: int = 2, text: str = TEXT, message: str = "undefined") -> Finding:
    return make_finding(path, line, Severity.BLOCKER, "python/F821", message, text)


def marker_of(f: Finding, *, key: bool = True, content: bool = True) -> FindingMarker:
    return FindingMarker(
        head_sha=OLD,
        rule=f.rule,
        fingerprint=f.fingerprint,
        path=f.path,
        line=f.line,
        severity=f.severity.label,
        key=problem_key(f.rule, f.path, f.message) if key else "",
        content=f.content if content else "",
    )


RECORDED = marker_of(found())
RENAMED = {"src/app.py": "src/core.py"}


@pytest.mark.parametrize(
    ("current", "renames", "same"),
    [
        (found(line=7), {}, True),  # the line moved: the fingerprint has no line number
        (found(text="  return   undefined_thing + 1", message="other"), {}, False),  # spacing is text
        (found(text="return undefined_thing + 2"), {}, True),  # edited, same problem key
        (found(text="return undefined_thing + 2", message="other"), {}, False),
        (found(path="src/core.py", line=9), RENAMED, True),  # renamed: its content
        (found(path="src/core.py", text="return undefined_thing + 2"), RENAMED, True),  # renamed, edited
        (found(path="src/core.py", text="x = 2", message="other"), RENAMED, False),
        (found(path="src/core.py"), {}, False),  # the same text in another file is another finding
        (found(path="src/other.py"), RENAMED, False),  # renamed elsewhere
    ],
)
def test_matches(current: Finding, renames: Mapping[str, str], same: bool) -> None:
    assert matches(RECORDED, current, renames) is same


def test_an_old_marker_without_content_is_not_recognised_after_a_rename() -> None:
    old = marker_of(found(), key=False, content=False)
    assert matches(old, found(path="src/core.py"), RENAMED) is False
    assert matches(old, found(line=40), {}) is True


def test_the_same_text_twice_in_a_file_keeps_two_identities() -> None:
    first, second = deduplicate([found(line=2), found(line=5)])
    assert first.fingerprint != second.fingerprint and first.content != second.content
    assert (first.fingerprint, first.content) == (found().fingerprint, found().content)


@pytest.mark.parametrize(
    ("files", "renames"),
    [
        ([], {}),
        ([{"filename": "b.py", "status": "renamed", "previous_filename": "a.py"}], {"a.py": "b.py"}),
        ([{"filename": "b.py", "status": "modified", "previous_filename": "a.py"}], {}),
        ([{"filename": "b.py", "status": "renamed"}], {}),
    ],
)
def test_renames_in(files: list[dict[str, Any]], renames: dict[str, str]) -> None:
    assert renames_in(files) == renames


PATCH = "@@ -1,2 +1,3 @@\n a = 1\n+b = 2\n c = 3"


@pytest.mark.parametrize(
    ("since", "comparison", "scope", "lines"),
    [
        (None, None, Scope.FULL, None),  # the first review
        (NEW, None, Scope.FULL, None),  # the same head again (a Re-run)
        (OLD, None, Scope.REWRITTEN, None),  # GitHub no longer knows the old head
        (OLD, {"status": "diverged", "files": []}, Scope.REWRITTEN, None),
        (OLD, {"status": "behind", "files": []}, Scope.REWRITTEN, None),
        (
            OLD,
            {"status": "ahead", "files": [{"filename": "a.py", "patch": PATCH}]},
            Scope.DELTA,
            {"a.py": {2}},
        ),
        (OLD, {"status": "ahead", "files": [{"filename": "bin.dat"}]}, Scope.DELTA, {"bin.dat": set()}),
        (OLD, {"status": "ahead", "files": [{"filename": "a.py"}] * 300}, Scope.FULL, None),  # cut short
    ],
)
def test_delta_of(
    since: str | None, comparison: dict[str, Any] | None, scope: Scope, lines: dict[str, set[int]] | None
) -> None:
    delta = delta_of(since, NEW, comparison)
    assert delta.scope is scope
    assert (None if delta.lines is None else {p: set(n) for p, n in delta.lines.items()}) == lines


@pytest.mark.parametrize(
    ("scope", "note"),
    [
        (Scope.FULL, None),
        (Scope.DELTA, f"Inline comments only on lines changed since my last review at {OLD[:12]}."),
        (
            Scope.REWRITTEN,
            f"History was rewritten since my last review at {OLD[:12]}, so this is a full review.",
        ),
    ],
)
def test_the_scope_is_said_in_one_sentence(scope: Scope, note: str | None) -> None:
    assert Delta(scope, OLD).note == note


@pytest.mark.parametrize(
    ("line", "start", "changed", "inside"),
    [
        (2, None, {2}, True),
        (3, None, {2}, False),
        (4, 2, {2}, True),  # a multi-line finding: any of its lines
        (4, 3, {2}, False),
    ],
)
def test_in_delta(line: int, start: int | None, changed: set[int], inside: bool) -> None:
    f = Finding("a.py", line, Severity.NIT, "r", "m", "fp", start_line=start)
    assert in_delta(f, Delta(Scope.DELTA, OLD, {"a.py": frozenset(changed)})) is inside
    assert in_delta(f, Delta(Scope.FULL)) is True


def review(login: str, head: str | None, at: str) -> dict[str, Any]:
    body = "text" if head is None else ReviewMarker(head, Trigger.PUSH, "COMMENT", 0).encode()
    return {"id": 1, "user": {"login": login}, "body": body, "submitted_at": at}


@pytest.mark.parametrize(
    ("mine", "head"),
    [
        ([], None),
        ([review("revbot[bot]", OLD, "2026-01-01T00:00:00Z")], OLD),
        (
            [
                review("revbot[bot]", OLD, "2026-01-01T00:00:00Z"),
                review("revbot[bot]", NEW, "2026-01-02T00:00:00Z"),
            ],
            NEW,
        ),
        (
            [
                review("revbot[bot]", OLD, "2026-01-01T00:00:00Z"),
                review("revbot[bot]", None, "2026-01-02T00:00:00Z"),
            ],
            OLD,
        ),
    ],
)
def test_last_reviewed_head(mine: list[dict[str, Any]], head: str | None) -> None:
    assert last_reviewed_head(mine) == head


def plan(findings: tuple[Finding, ...], **options: Any) -> render.ReviewPlan:
    return render.plan_review(
        ReviewResult(Verdict.REQUEST_CHANGES, "s", findings),
        head_sha=NEW,
        commentable={"src/app.py": frozenset(range(1, 20)), "src/core.py": frozenset(range(1, 20))},
        policy=render.Policy(approve=True, pr_by_bot=False),
        trigger=Trigger.PUSH,
        bot_name="revbot",
        **options,
    )


def test_a_finding_an_open_thread_holds_is_not_posted_again_even_renamed() -> None:
    kept, new = found(path="src/core.py", line=9), found(path="src/core.py", line=12, text="y = z")
    p = plan((kept, new), threads=[RECORDED], renames=RENAMED)
    assert [c["line"] for c in p.comments] == [12]  # same message, other text: another occurrence
    assert p.in_threads == (kept,)
    assert [m.line for m in FindingMarker.read_all(p.body)] == [9]  # listed: its marker goes along


def test_a_delta_review_lists_findings_on_unchanged_lines_in_the_body() -> None:
    old_line, new_line = found(line=2), found(line=12, text="y = z")
    delta = Delta(Scope.DELTA, OLD, {"src/app.py": frozenset({12})})
    p = plan((old_line, new_line), delta=delta)
    assert [c["line"] for c in p.comments] == [12]
    assert p.unchanged == (old_line,) and p.event == "REQUEST_CHANGES"
    assert "**On lines unchanged since my last review**" in p.body and "`src/app.py:2`" in p.body
    assert delta.note is not None and delta.note in p.body
    assert [m.line for m in FindingMarker.read_all(p.body)] == [2]


@pytest.mark.parametrize(
    ("status_of", "renames", "status"),
    [
        ((), {}, ThreadStatus.FIXED),
        ((found(path="src/core.py"),), RENAMED, ThreadStatus.NOT_FIXED),
        ((found(path="src/core.py"),), {}, ThreadStatus.FIXED),
        ((), RENAMED, ThreadStatus.CANNOT_TELL),  # renamed without changes: not analysed there
    ],
)
def test_thread_status_follows_renames(
    status_of: tuple[Finding, ...], renames: Mapping[str, str], status: ThreadStatus
) -> None:
    skipped = (Skipped("src/core.py", "renamed without changes"),) if not status_of and renames else ()
    result = ReviewResult(Verdict.COMMENT, "s", status_of, skipped=skipped, analysed=("src/core.py",))
    assert thread_status(RECORDED, result, renames) is status


def test_an_overrule_follows_its_finding_into_a_renamed_file() -> None:
    overrule = Overrule(
        fingerprint=RECORDED.fingerprint,
        key=RECORDED.key,
        rule=RECORDED.rule,
        path=RECORDED.path,
        line=2,
        severity="blocker",
        by="mia",
        reason="",
        thread=1,
        content=RECORDED.content,
    )
    moved = ReviewResult(Verdict.REQUEST_CHANGES, "s", (found(path="src/core.py", line=30),))
    assert withdraw(moved, overruled=[overrule], changed=1, renames=RENAMED).findings == ()
    assert withdraw(moved, overruled=[overrule], changed=1).findings == moved.findings
    assert Overrule.read_all(overrule.encode()) == [overrule]


EDITED = found(text="return undefined_thing + 2")


@pytest.mark.parametrize(
    ("findings", "holds"),
    [
        ((found(line=7),), [True]),
        ((EDITED, found(line=7)), [False, True]),  # its own text first, wherever it is listed
        ((EDITED,), [True]),  # edited: the same problem
        ((EDITED, found(text="return undefined_thing + 3")), [True, False]),  # one thread, one finding
        ((found(path="src/core.py"),), [False]),
    ],
)
def test_a_thread_holds_one_finding(findings: tuple[Finding, ...], holds: list[bool]) -> None:
    assert held(findings, [RECORDED], {}) == holds
