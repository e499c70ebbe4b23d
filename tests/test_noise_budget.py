"""The noise budget (issue 29): ``review.inline_min_severity`` and ``review.max_nits`` keep minor
findings out of the inline comments and list them, collapsed, in the review body; both are read
from the base branch only, so a pull request cannot change how loudly it is judged."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.review.core.model import Finding, ReviewResult, Severity, Verdict
from app.review.output import render
from app.review.rounds.markers import Trigger
from app.review.rounds.overrule import severity_named
from app.settings.repoconfig import RepoConfig, SeverityName, parse_repo_config
from tests.harness import REPO, BotHarness

AUTHOR = "alice"
DECOY = "revbot"
LOGS = 8  # unused imports: nits, one each (each says another name: none is the same finding)
MODULES = ("os", "sys", "json", "re", "abc", "enum", "math", "time")
NOISY = {
    "web/tasks.py": "".join(f"import {name}\n" for name in MODULES[:LOGS]),
    "web/app.js": "debugger;\n",
}


def posted_review(bot: BotHarness) -> dict[str, Any]:
    [post] = [
        c for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/reviews") and c.status == 200
    ]
    body: dict[str, Any] = post.body
    return body


def inline_rules(review: dict[str, Any]) -> list[str]:
    return sorted(
        rule
        for c in review.get("comments", [])
        for rule in ("python/F401", "debug/debugger")
        if rule in c["body"]
    )


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[BotHarness]:
    harness = BotHarness(tmp_path)
    harness.fake.add_user(DECOY)
    yield harness
    await harness.stop()
    harness.assert_conforms()


async def review_of(
    bot: BotHarness, *, base_config: str | None, head_files: dict[str, str]
) -> dict[str, Any]:
    base = {"README.md": "# widgets\n"}
    if base_config is not None:
        base[".github/revbot.yml"] = base_config
    number = bot.open_pull(head_files, base_files=base, author=AUTHOR)
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    return posted_review(bot)


@pytest.mark.e2e
@pytest.mark.slow
async def test_by_default_five_nits_are_inline_and_the_rest_collapse_into_the_body(bot: BotHarness) -> None:
    review = await review_of(bot, base_config=None, head_files=NOISY)
    assert inline_rules(review) == ["debug/debugger"] + ["python/F401"] * 5
    body = review["body"]
    assert f"<details><summary>{LOGS - 5} minor findings (over the budget of 5 inline nits)</summary>" in body
    assert body.count("`python/F401` `web/tasks.py:") == LOGS - 5  # a short list, one line each
    assert "| nit | 8 |" in body  # still counted in the review


@pytest.mark.e2e
@pytest.mark.slow
async def test_the_base_branch_sets_the_budget(bot: BotHarness) -> None:
    config = "review:\n  inline_min_severity: concern\n"
    review = await review_of(bot, base_config=config, head_files=NOISY)
    assert inline_rules(review) == ["debug/debugger"]
    assert f"{LOGS} minor findings (below concern)" in review["body"]


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_pull_request_that_sets_its_own_budget_is_not_obeyed(bot: BotHarness) -> None:
    """The hostile fork: its head silences every finding but blockers; the base's (default)
    budget applies and the findings are posted inline."""
    hostile = {**NOISY, ".github/revbot.yml": "review:\n  max_nits: 0\n  inline_min_severity: blocker\n"}
    review = await review_of(bot, base_config="review:\n  max_nits: 2\n", head_files=hostile)
    assert inline_rules(review) == ["debug/debugger"] + ["python/F401"] * 2
    assert "over the budget of 2 inline nits" in review["body"]


# ------------------------------------------------------------------------------- pure decisions
def nit(line: int) -> Finding:  # each its own problem (identical ones share one comment)
    return Finding("a.js", line, Severity.NIT, "debug/console-log", f"log {line}", f"fp{line}")


def concern(line: int) -> Finding:
    return Finding("a.js", line, Severity.CONCERN, "debug/debugger", "debugger", f"fc{line}")


@pytest.mark.parametrize(
    ("candidate", "inline", "minimum", "max_nits", "over"),
    [
        (nit(1), [], Severity.NIT, 5, False),
        (nit(6), [nit(n) for n in range(1, 6)], Severity.NIT, 5, True),
        (nit(5), [nit(n) for n in range(1, 5)], Severity.NIT, 5, False),
        (nit(1), [], Severity.NIT, 0, True),
        (concern(1), [nit(n) for n in range(1, 6)], Severity.NIT, 5, False),  # nits never push a concern
        (concern(1), [], Severity.BLOCKER, 5, True),
        (nit(1), [], Severity.CONCERN, 5, True),
        (concern(2), [concern(1)], Severity.CONCERN, 0, False),  # max_nits counts nits only
    ],
)
def test_over_budget(
    candidate: Finding, inline: list[Finding], minimum: Severity, max_nits: int, over: bool
) -> None:
    policy = render.Policy(approve=True, pr_by_bot=False, inline_min_severity=minimum, max_nits=max_nits)
    assert render.over_budget(candidate, inline, policy) is over


def test_the_budget_is_spent_most_severe_first_and_every_quieted_finding_keeps_its_marker() -> None:
    findings = (nit(1), nit(2), nit(3), concern(4))
    plan = render.plan_review(
        ReviewResult(Verdict.COMMENT, "summary", findings),
        head_sha="a" * 40,
        commentable={"a.js": frozenset({1, 2, 3, 4})},
        policy=render.Policy(approve=True, pr_by_bot=False, max_nits=1),
        trigger=Trigger.DECOY,
        bot_name="revbot",
    )
    assert [f.line for f in plan.inline] == [4, 1]
    assert [f.line for f in plan.quieted] == [2, 3] and set(plan.quieted) <= set(plan.in_body)
    assert plan.body.count("<!-- revbot:finding ") == 2  # the quieted ones, read back at re-review
    assert "Findings not commented inline" not in plan.body


def test_the_settings_name_every_severity_and_nothing_else() -> None:
    assert {s.label for s in Severity} == {n.value for n in SeverityName}
    assert all(severity_named(n.value).label == n.value for n in SeverityName)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("review:\n  inline_min_severity: loud\n", "Input should be 'nit', 'concern' or 'blocker'"),
        ("review:\n  max_nits: -1\n", "greater than or equal to 0"),
        ("readiness:\n  comment: sometimes\n", "Input should be 'actionable', 'always' or 'never'"),
    ],
)
def test_a_bad_value_is_a_settings_problem_and_the_defaults_apply(text: str, problem: str) -> None:
    config, said = parse_repo_config(text)
    assert config == RepoConfig()
    assert said is not None and problem in said
