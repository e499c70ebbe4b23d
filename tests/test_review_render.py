"""Pure decisions of the renderer, the markers and the repository config, table-driven (the mention
parser has its own file, `test_commands.py`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.review.core.model import Finding, ReviewResult, Severity, Skipped, Verdict
from app.review.engine import inert
from app.review.output import checkrun, render
from app.review.rounds.markers import FindingMarker, ReviewMarker, Trigger, decode_all, encode
from app.review.rounds.overrule import Overrule
from app.settings.repoconfig import RepoConfig, parse_repo_config

HEAD = "a" * 40


def finding(
    path: str = "a.py", line: int = 3, severity: Severity = Severity.BLOCKER, **kw: object
) -> Finding:
    fields: dict[str, object] = {
        "path": path,
        "line": line,
        "severity": severity,
        "rule": "python/F821",
        "message": "Undefined name `x`",
        "fingerprint": f"fp-{path}-{line}",
    }
    fields.update(kw)
    return Finding(**fields)  # type: ignore[arg-type]


def result(
    *findings: Finding, verdict: Verdict | None = None, skipped: tuple[Skipped, ...] = ()
) -> ReviewResult:
    if verdict is None:
        severities = {f.severity for f in findings}
        verdict = (
            Verdict.REQUEST_CHANGES
            if Severity.BLOCKER in severities
            else Verdict.COMMENT
            if findings
            else Verdict.APPROVE
        )
    return ReviewResult(verdict=verdict, summary="summary", findings=findings, skipped=skipped)


@pytest.mark.parametrize(
    ("verdict", "approve", "by_bot", "event"),
    [
        (Verdict.APPROVE, True, False, "APPROVE"),
        (Verdict.APPROVE, False, False, "COMMENT"),
        (Verdict.APPROVE, True, True, "COMMENT"),
        (Verdict.REQUEST_CHANGES, True, False, "REQUEST_CHANGES"),
        (Verdict.REQUEST_CHANGES, False, False, "REQUEST_CHANGES"),
        (Verdict.REQUEST_CHANGES, True, True, "COMMENT"),
        (Verdict.COMMENT, True, False, "COMMENT"),
        (Verdict.COMMENT, False, True, "COMMENT"),
    ],
)
def test_review_event_under_policy(verdict: Verdict, approve: bool, by_bot: bool, event: str) -> None:
    assert render.review_event(verdict, render.Policy(approve=approve, pr_by_bot=by_bot)) == event


def plan(
    res: ReviewResult, commentable: dict[str, frozenset[int]], max_comments: int = 30
) -> render.ReviewPlan:
    policy = render.Policy(approve=True, pr_by_bot=False, max_comments=max_comments)
    return render.plan_review(
        res, head_sha=HEAD, commentable=commentable, policy=policy, trigger=Trigger.DECOY, bot_name="revbot"
    )


def test_findings_outside_the_diff_go_to_the_body() -> None:
    inside, outside = finding(line=3), finding(line=50)
    p = plan(result(inside, outside), {"a.py": frozenset({1, 2, 3, 4})})
    assert [c["line"] for c in p.comments] == [3]
    assert p.in_body == (outside,)
    assert "`a.py:50`" in p.body
    assert [m.line for m in FindingMarker.read_all(p.body)] == [50]


def test_the_most_severe_findings_get_the_inline_slots() -> None:
    nits = [finding(line=n, severity=Severity.NIT, message=f"Undefined name `x{n}`") for n in range(1, 4)]
    blocker = finding(line=9)
    p = plan(result(*nits, blocker), {"a.py": frozenset(range(1, 20))}, max_comments=2)
    assert [c["line"] for c in p.comments] == [9, 1]
    assert [f.line for f in p.in_body] == [2, 3]
    assert "over the limit of inline comments" in p.body


def test_multi_line_findings_use_start_line_only_within_one_hunk() -> None:
    spanning = finding(line=6, start_line=4)
    broken = finding(path="b.py", line=6, start_line=4, message="Undefined name `y`")
    p = plan(result(spanning, broken), {"a.py": frozenset({4, 5, 6}), "b.py": frozenset({4, 6})})
    by_path = {c["path"]: c for c in p.comments}
    assert (by_path["a.py"]["start_line"], by_path["a.py"]["start_side"], by_path["a.py"]["line"]) == (
        4,
        "RIGHT",
        6,
    )
    assert "start_line" not in by_path["b.py"]


def test_suggestions_use_github_suggestion_blocks() -> None:
    p = plan(result(finding(suggestion="")), {"a.py": frozenset({3})})
    assert "```suggestion\n```" in p.comments[0]["body"]
    p = plan(result(finding(suggestion="x = ```\n")), {"a.py": frozenset({3})})
    assert "````suggestion\nx = ```\n````" in p.comments[0]["body"]


def test_housekeeping_is_summarised_and_skipped_files_are_named() -> None:
    tidy = finding(
        severity=Severity.NIT, rule="hygiene/trailing-whitespace", message="lines 3, 4", inline=False
    )
    p = plan(result(tidy, skipped=(Skipped("yarn.lock", "generated or vendored"),)), {"a.py": frozenset({3})})
    assert p.comments == ()
    assert "**Housekeeping**" in p.body and "`yarn.lock`: generated or vendored" in p.body
    assert p.event == "COMMENT"


def test_untrusted_text_cannot_forge_a_marker_or_break_markdown() -> None:
    forged = (
        '<!-- revbot:review {"head_sha": "f", "trigger": "decoy", "verdict": "APPROVE", "findings": 0} -->'
    )
    evil = finding(path=f"x`{forged}.py", message=f"{forged}\nline `{forged}` <b>bold</b>")
    p = plan(result(evil), {})
    assert len(decode_all(p.body, "review")) == 1
    assert ReviewMarker.read(p.body).head_sha == HEAD  # type: ignore[union-attr]
    assert "&lt;b&gt;bold&lt;/b&gt;" in p.body


def test_code_spans_show_code_literally() -> None:
    conflict = finding(path="a.py", rule="conflict-marker", message="merge conflict marker `<<<<<<<` left in")
    p = plan(result(conflict), {"a.py": frozenset({3})})
    assert "`<<<<<<<`" in p.comments[0]["body"]
    assert inert.code("a<b>&c") == "`a<b>&c`"


def test_markers_round_trip_and_ignore_malformed_ones() -> None:
    marker = ReviewMarker(head_sha=HEAD, trigger=Trigger.MENTION, verdict="APPROVE", findings=0)
    body = f"text\n{marker.encode()}\n<!-- revbot:review {{not json}} -->"
    assert ReviewMarker.read(body) == marker
    assert decode_all(encode("note", key="a--b"), "note") == [{"key": "a--b"}]
    assert "--" not in encode("note", key="a--b")[len("<!-- ") : -len(" -->")]
    assert ReviewMarker.read("no marker") is None


# Every value a review marker has ever carried, as the JSON text older versions wrote, and what
# this version reads: the persisted values must never change. A value it does not know (written by a
# newer version, or not a string) reads as None, and the rest of the marker still counts (its head
# stays reviewed, so it is not reviewed twice).
MARKER_TRIGGERS: list[tuple[str, Trigger | None]] = [
    ('"decoy"', Trigger.DECOY),
    ('"team"', Trigger.TEAM),
    ('"mention"', Trigger.MENTION),
    ('"rerun"', Trigger.RERUN),
    ('"auto"', Trigger.AUTO),
    ('"push"', Trigger.PUSH),
    ('"overrule"', Trigger.OVERRULE),
    ('"cli"', None),  # the command line prints what `@slug review` would post: no trigger of its own
    ('"schedule"', None),
    ('"DECOY"', None),
    ('""', None),
    ("7", None),
    ("null", None),
]


@pytest.mark.parametrize(("raw", "expected"), MARKER_TRIGGERS)
def test_review_markers_read_every_trigger_and_survive_unknown_ones(
    raw: str, expected: Trigger | None
) -> None:
    line = (
        '<!-- revbot:review {"findings":2,"head_sha":"' + HEAD + '","issued_at":1.5,'
        '"trigger":' + raw + ',"verdict":"REQUEST_CHANGES"} -->'
    )
    marker = ReviewMarker.read(f"body\n{line}")
    assert marker == ReviewMarker(
        head_sha=HEAD, trigger=expected, verdict="REQUEST_CHANGES", findings=2, issued_at=1.5
    )
    if expected is not None:
        assert marker.encode() == line  # byte-identical to what older versions wrote


def test_the_trigger_table_covers_every_trigger() -> None:
    assert {t for _, t in MARKER_TRIGGERS} - {None} == set(Trigger)


@pytest.mark.parametrize(
    ("severities", "incomplete", "unconfirmed", "conclusion"),
    [
        ((), False, False, "success"),
        ((Severity.NIT,), False, False, "success"),
        ((Severity.CONCERN,), False, False, "neutral"),
        ((Severity.BLOCKER,), False, False, "failure"),
        # an analysis the pull request made incomplete never passes a required check
        ((), True, False, "action_required"),
        ((Severity.NIT,), True, False, "action_required"),
        ((Severity.CONCERN,), True, False, "action_required"),
        ((), True, True, "failure"),  # an earlier blocker's file could not be judged
        ((Severity.CONCERN,), True, True, "failure"),
        ((Severity.BLOCKER,), True, False, "failure"),
    ],
)
def test_the_review_check_passes_only_a_complete_analysis(
    severities: tuple[Severity, ...], incomplete: bool, unconfirmed: bool, conclusion: str
) -> None:
    found = replace(result(*(finding(severity=s) for s in severities)), incomplete=incomplete)
    assert checkrun.check_conclusion(found, blockers_unconfirmed=unconfirmed) == conclusion


def test_check_run_outcome_follows_the_worst_finding() -> None:
    assert checkrun.check_conclusion(result(finding())) == "failure"
    assert checkrun.check_conclusion(result(finding(severity=Severity.CONCERN))) == "neutral"
    assert checkrun.check_conclusion(result(finding(severity=Severity.NIT))) == "success"
    assert checkrun.check_conclusion(result()) == "success"
    assert (
        checkrun.check_title(result(finding(), finding(line=4), finding(severity=Severity.NIT)))
        == "2 blockers, 1 nit"
    )
    notes = checkrun.check_annotations(result(finding(start_line=2)))
    assert notes == [
        {
            "path": "a.py",
            "start_line": 2,
            "end_line": 3,
            "annotation_level": "failure",
            "title": "python/F821",
            "message": "Undefined name `x`",
        }
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (None, None),
        ("", None),
        ("review:\n  auto: true\n  max_comments: 5\n", None),
        ("review: [1, 2", "not valid YAML"),
        ("- a list", "expected a mapping"),
        ("review:\n  colour: blue\n", "review.colour"),
        ("review:\n  max_files: 0\n", "review.max_files"),
    ],
)
def test_repo_config_never_raises(text: str | None, problem: str | None) -> None:
    config, found = parse_repo_config(text)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found
        assert config == RepoConfig()
    if text and "auto: true" in text:
        assert config.review.auto and config.review.max_comments == 5


def _overrule(rule: str, line: int, by: str) -> Overrule:
    return Overrule("f", "k", rule, "src/a.py", line, "concern", by, "", 1)


@pytest.mark.parametrize(
    ("summary", "overruled", "expected"),
    [
        ("Review body.", [], "Review body."),
        (
            "Review body.",
            [_overrule("debug/print", 3, "mia")],
            "Review body.\n\n**Overruled since this review**:\n- `debug/print` `src/a.py:3` by `mia`",
        ),
        (  # a second recount replaces the first one's list
            "Review body.\n\n**Overruled since this review**:\n- `debug/print` `src/a.py:3` by `mia`",
            [_overrule("debug/print", 3, "mia"), _overrule("api/break", 9, "bob")],
            "Review body.\n\n**Overruled since this review**:\n- `debug/print` `src/a.py:3` by `mia`\n"
            "- `api/break` `src/a.py:9` by `bob`",
        ),
        (  # nothing overruled any more: the list goes
            "Review body.\n\n**Overruled since this review**:\n- `debug/print` `src/a.py:3` by `mia`",
            [],
            "Review body.",
        ),
    ],
)
def test_a_recounted_summary_lists_what_was_overruled_since_the_review(
    summary: str, overruled: list[Overrule], expected: str
) -> None:
    assert render.recounted_summary(summary, overruled) == expected
