"""One comment per problem: findings on one line share a comment, and the same finding in
several places is said once with a list of where (``render._place``, ``comments.comment_body``).
The comment carries every finding's marker, so its thread is resolved only once every one of
them is fixed at head (``decide.combined_status``), and none of them is posted again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.github.calls import ReviewThread
from app.review.core.model import Finding, ReviewResult, Severity, ThreadStatus, Verdict
from app.review.output import render
from app.review.output.comments import MAX_HELD
from app.review.rounds.decide import combined_status
from app.review.rounds.markers import FindingMarker, Trigger
from app.usecases.threads import OpenThread
from tests.harness import REPO, BotHarness, harness_with_decoy

HEAD = "a" * 40


def at(
    path: str,
    line: int,
    rule: str = "debug/console-log",
    message: str = "`console.log()` left in.",
    severity: Severity = Severity.NIT,
) -> Finding:
    return Finding(path, line, severity, rule, message, f"fp-{path}-{line}-{rule}")


def plan(
    *findings: Finding,
    max_comments: int = 30,
    max_nits: int = 5,
    minimum: Severity = Severity.NIT,
    commentable: dict[str, frozenset[int]] | None = None,
) -> render.ReviewPlan:
    policy = render.Policy(
        approve=True,
        pr_by_bot=False,
        max_comments=max_comments,
        max_nits=max_nits,
        inline_min_severity=minimum,
    )
    return render.plan_review(
        ReviewResult(Verdict.COMMENT, "s", findings=findings),
        head_sha=HEAD,
        commentable=commentable or {"a.js": frozenset(range(1, 50)), "b.js": frozenset(range(1, 50))},
        policy=policy,
        trigger=Trigger.MENTION,
        bot_name="revbot",
    )


def test_the_same_finding_in_three_files_is_one_comment_that_lists_where() -> None:
    p = plan(at("a.js", 3), at("b.js", 7), at("a.js", 9))
    [comment] = p.comments
    assert (comment["path"], comment["line"]) == ("a.js", 3)
    assert "The same at `a.js:9`, `b.js:7`." in comment["body"]
    assert len(FindingMarker.read_all(comment["body"])) == 3  # each held by the thread
    lead = FindingMarker.read(comment["body"])
    assert lead is not None and lead.line == 3  # the lead's marker comes last
    assert "| nit | 3 |" in p.body  # still counted, one each
    assert p.in_body == () and len(p.grouped) == 2


def test_two_findings_on_one_line_are_one_comment_led_by_the_most_severe() -> None:
    blocker = at("a.js", 4, "secrets/aws-access-key", "An AWS key.", Severity.BLOCKER)
    p = plan(at("a.js", 4), blocker)
    [comment] = p.comments
    first, second = (line for line in comment["body"].splitlines() if line.startswith("**"))
    assert first.startswith("**blocker** · `secrets/aws-access-key`") and second.startswith("**nit**")
    lead = FindingMarker.read(comment["body"])
    assert lead is not None and lead.rule == "secrets/aws-access-key"


@pytest.mark.parametrize(
    ("findings", "comments"),
    [
        # Another message: another problem, another comment.
        ((at("a.js", 1), at("a.js", 2, message="Another.")), 2),
        # Another rule with the same words: another problem.
        ((at("a.js", 1), at("a.js", 2, rule="debug/debugger")), 2),
        # The same words at another severity are not said as one.
        ((at("a.js", 1), at("a.js", 2, severity=Severity.CONCERN)), 2),
        # The same, twice: one.
        ((at("a.js", 1), at("a.js", 2)), 1),
        # A model's finding is judged alone, thread by thread: never grouped.
        ((at("a.js", 1, rule="llm/logic"), at("a.js", 1)), 2),
    ],
)
def test_what_is_grouped(findings: tuple[Finding, ...], comments: int) -> None:
    assert len(plan(*findings).comments) == comments


def test_grouping_costs_no_inline_slot_and_no_nit_budget() -> None:
    same = [at("a.js", n) for n in range(1, 9)]
    others = [at("b.js", n, message=f"other {n}") for n in range(1, 5)]
    p = plan(*same, *others, max_comments=3, max_nits=3)
    assert len(p.comments) == 3  # one for the eight, two more nits before the budget
    assert len(p.grouped) == 7 and len(p.quieted) == 2


CONCERN = at("a.js", 4, "debug/debugger", "`debugger` left in.", Severity.CONCERN)


@pytest.mark.parametrize(
    ("findings", "budget", "placed"),
    [
        # (comments, held by another's, quieted into the body, in the body in all)
        # A blocker and a nit on one line: one comment, the blocker's.
        (
            (at("a.js", 4, severity=Severity.BLOCKER, rule="x/b", message="b"), at("a.js", 4)),
            {},
            (1, 1, 0, 0),
        ),
        # A nit the repository keeps out of inline comments is not slipped into another's.
        ((CONCERN, at("a.js", 4)), {"minimum": Severity.CONCERN}, (1, 0, 1, 1)),
        ((CONCERN, at("a.js", 4), at("a.js", 5)), {"max_nits": 0}, (1, 0, 2, 2)),
        # A budget of nits left: the line's nit joins the concern's comment, and costs none of it.
        ((CONCERN, at("a.js", 4), at("a.js", 5, message="other")), {"max_nits": 1}, (2, 1, 0, 0)),
        # Every slot taken: what joins a comment is still held by it, the rest goes to the body.
        ((at("a.js", 1), at("a.js", 2, message="other"), at("b.js", 1)), {"max_comments": 1}, (1, 1, 0, 1)),
        # The same problem, but the first place is not commentable: the next one leads.
        (
            (at("a.js", 1), at("b.js", 1), at("b.js", 2)),
            {"commentable": {"b.js": frozenset({1, 2})}},
            (1, 1, 0, 1),
        ),
    ],
)
def test_grouping_within_the_budget(
    findings: tuple[Finding, ...], budget: dict[str, Any], placed: tuple[int, int, int, int]
) -> None:
    p = plan(*findings, **budget)
    assert (len(p.comments), len(p.grouped), len(p.quieted), len(p.in_body)) == placed
    held = [m for c in p.comments for m in FindingMarker.read_all(c["body"])]
    assert len(held) == len(p.inline) + len(p.grouped)  # each held finding has its marker


GITHUB_MAX_BODY = 65_536  # characters GitHub accepts in a comment's body


def test_a_problem_found_everywhere_is_said_in_few_comments_of_a_size_github_accepts() -> None:
    """The most findings a review keeps (50 a file, 500 in all: ``engine.bounded``), all one
    problem: every one is held by a comment, and no comment is too long to post."""
    files = [f".github/workflows/release-{n}-publish-to-the-package-registry.yml" for n in range(10)]
    message = "`${{ github.event.pull_request.title }}` expanded in a run script."
    same = [
        at(path, n, "workflows/template-injection", message, Severity.CONCERN)
        for path in files
        for n in range(1, 51)
    ]
    p = plan(*same, commentable={path: frozenset(range(1, 51)) for path in files})
    assert max(len(c["body"]) for c in p.comments) <= GITHUB_MAX_BODY
    assert sum(len(FindingMarker.read_all(c["body"])) for c in p.comments) == len(same)
    assert len(p.comments) == -(-len(same) // MAX_HELD) and p.in_body == ()


# A comment as versions before grouping wrote it: one finding, one marker (byte for byte).
OLD_COMMENT = (
    "**blocker** · `python/F821` · Undefined name `x`\n\n"
    '<!-- revbot:finding {"content":"c1","fingerprint":"fp1","head_sha":"'
    + HEAD
    + '","key":"k1","line":3,"path":"a.py","rule":"python/F821","severity":"blocker"} -->'
)


def root(body: str) -> ReviewThread:
    return ReviewThread("PRRT_1", False, "a.py", 3, 11, body, "revbot", "Bot")


def test_a_comment_of_an_older_version_holds_its_one_finding() -> None:
    item = OpenThread.read(root(OLD_COMMENT))
    assert item is not None and item.also == ()
    assert (item.finding.rule, item.finding.fingerprint, item.finding.key, item.finding.content) == (
        "python/F821",
        "fp1",
        "k1",
        "c1",
    )
    assert item.severity is Severity.BLOCKER


def test_a_comment_that_holds_several_findings_is_read_back_with_all_of_them() -> None:
    blocker = at("a.js", 4, "secrets/aws-access-key", "An AWS key.", Severity.BLOCKER)
    [comment] = plan(at("a.js", 4), blocker, replace(blocker, path="b.js", line=9, fingerprint="fp")).comments
    item = OpenThread.read(root(comment["body"]))
    assert item is not None and item.finding.rule == "secrets/aws-access-key"  # the lead
    assert sorted((m.path, m.line) for m in item.also) == [("a.js", 4), ("b.js", 9)]
    assert item.severity is Severity.BLOCKER
    assert OpenThread.read(root("A reply that quotes no marker.")) is None


@pytest.mark.parametrize(
    ("statuses", "combined"),
    [
        ([ThreadStatus.FIXED, ThreadStatus.FIXED], ThreadStatus.FIXED),
        ([ThreadStatus.FIXED, ThreadStatus.NOT_FIXED], ThreadStatus.NOT_FIXED),
        ([ThreadStatus.CANNOT_TELL, ThreadStatus.FIXED], ThreadStatus.CANNOT_TELL),
        ([ThreadStatus.CANNOT_TELL, ThreadStatus.NOT_FIXED], ThreadStatus.NOT_FIXED),
        ([ThreadStatus.FIXED], ThreadStatus.FIXED),
    ],
)
def test_combined_status(statuses: list[ThreadStatus], combined: ThreadStatus) -> None:
    assert combined_status(statuses) is combined


def test_a_suggestion_that_would_quote_a_secret_is_withheld() -> None:
    key = "AKIA" + "Q3EGRIYNSNDM2XUP"
    p = plan(Finding("a.js", 2, Severity.NIT, "python/F541", "f-string", "fp", suggestion=f'K = "{key}"\n'))
    assert "suggested fix is withheld" in p.comments[0]["body"] and key not in p.comments[0]["body"]


# --- through the fake GitHub: the thread follows all of its findings ----------------------------

AUTHOR = "alice"
DECOY = "revbot"


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[BotHarness]:
    async with harness_with_decoy(tmp_path, DECOY) as harness:
        yield harness


def threads_on(bot: BotHarness, number: int, path: str) -> list[tuple[str, bool]]:
    world = bot.fake.world
    found = []
    for thread in world.threads_of(world.pull(world.repo(REPO), number)):
        root = world.review_comments[thread.comment_ids[0]]
        if root.path == path:
            found.append((root.body, thread.is_resolved))
    return found


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_thread_of_two_findings_is_resolved_when_both_are_fixed(bot: BotHarness) -> None:
    path = "src/app/service.py"
    number = bot.open_pull({path: "def run():\n    print(undefined_total)\n"}, author=AUTHOR)
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    [(body, resolved)] = threads_on(bot, number, path)
    assert {m.rule for m in FindingMarker.read_all(body)} == {"python/F821", "debug/print"}
    assert not resolved
    bot.fake.push(REPO, "feature", {path: "def run():\n    print(1)\n"})  # one of the two fixed
    await bot.drain()
    [(_, resolved)] = threads_on(bot, number, path)
    assert not resolved  # the print is still there: the thread holds it
    await bot.fake.comment(REPO, number, "@revbot resolve", by=AUTHOR)  # "it is fixed"
    await bot.drain()
    [answer] = [c.body["body"] for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/replies")]
    assert "Still there at" in answer and "`debug/print` in `src/app/service.py`." in answer
    assert "F821" not in answer  # the fixed one is not said to be there
    bot.fake.push(REPO, "feature", {path: "def run():\n    return 1\n"})
    await bot.drain()
    [(_, resolved)] = threads_on(bot, number, path)
    assert resolved


# --- several names one rule flags on one line: one sentence -------------------------------------


@pytest.mark.parametrize(
    ("messages", "sentence"),
    [
        (
            ["`os` imported but unused (F401)", "`sys` imported but unused (F401)"],
            "`os` and `sys` imported but unused (F401)",
        ),
        (
            [f"`m{n}` imported but unused (F401)" for n in range(7)],
            "`m0`, `m1`, `m2` and 4 more imported but unused (F401)",
        ),
        (["Undefined name `x`", "Undefined name `y`"], "Undefined name `x` and `y`"),
        (["Undefined name `x`", "Line too long"], None),
        (["`a` is `b`", "`c` is `d`"], None),  # differ in more than one name
    ],
)
def test_one_sentence(messages: list[str], sentence: str | None) -> None:
    from app.review.engine.builtin import one_sentence

    assert one_sentence(messages) == sentence


async def test_seven_unused_imports_on_a_line_are_one_sentence() -> None:
    from app.review.engine.builtin import BuiltinReviewer
    from tests.test_review_analyzers import changed
    from tests.test_review_engine import RecordingReader, pull

    head = "import os, sys, json, re, abc, enum, math\n"
    file = changed("pkg/mod.py", None, head)
    result = await BuiltinReviewer().review(pull([file], RecordingReader({file.path: head})))
    [f401] = [f for f in result.findings if f.rule == "python/F401"]
    assert f401.message == "`os`, `sys`, `json` and 4 more imported but unused (F401)"
