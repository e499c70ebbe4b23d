"""The rule catalogue: each analyzer declares its rules, the engine reads them, the table
of docs/rules.md is ``python -m app rules``, and no finding names a rule it does not list (in the test
process every built-in analyzer checks its own findings: ``rule_catalogue``, from ``conftest``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.offline import offline
from app.review.analyzers import catalogue, conflicts, default_analyzers, file_level_rules
from app.review.analyzers.conflicts import ConflictMarkerAnalyzer
from app.review.core.model import PullContext, ReviewResult
from app.review.engine.builtin import BuiltinReviewer
from app.review.engine.rules import rules_markdown
from app.review.measure.evaluate import DEFAULT_CASES, load_cases, run_case
from app.settings.config import load_reviewer_settings
from tests.rule_catalogue import uncatalogued
from tests.test_review_analyzers import run, under_review

RULES_PAGE = Path(__file__).resolve().parent.parent / "docs" / "rules.md"


def test_the_rules_page_table_is_the_generated_catalogue() -> None:
    text = RULES_PAGE.read_text(encoding="utf-8")
    start, end = text.index("<!-- rules:start -->\n"), text.index("<!-- rules:end -->")
    assert text[start + len("<!-- rules:start -->\n") : end] == rules_markdown()


@pytest.mark.slow
def test_python_m_app_rules_prints_it() -> None:
    done = subprocess.run([sys.executable, "-m", "app", "rules"], capture_output=True, text=True, check=True)
    assert done.stdout == rules_markdown()


def test_rule_ids_are_unique_and_file_level_rules_come_from_the_declarations() -> None:
    ids = [rule.id for _, rule in catalogue()]
    assert len(ids) == len(set(ids))
    assert file_level_rules(default_analyzers()) == {
        "python/syntax-error",
        "python/declared-version",
        "python/newer-syntax",
        "hygiene/binary-file",
        "hygiene/large-file",
        "config/lint-rules-off",
        "config/lint-excludes",
        "config/bot-settings",
        "workflow/invalid-yaml",
    }
    assert all(rule.description and "\n" not in rule.description for _, rule in catalogue())


@pytest.mark.parametrize(
    ("rules", "unknown"),
    [
        (["conflict-marker", "hygiene/trailing-whitespace", "secrets/github-token"], set()),
        (["python/F401", "python/B006", "shell/SC2086", "dockerfile/DL3008", "workflow/artipacked"], set()),
        (["hygiene/trailing-whitespaces", "conflict-markers", "secrets/github"], None),
        (["shell/2086", "llm/logic", "injection/unknown"], None),  # the model's rules are not the analyzers'
    ],
)
def test_a_rule_is_catalogued_by_its_id_or_its_family(rules: list[str], unknown: set[str] | None) -> None:
    assert uncatalogued(rules) == (set(rules) if unknown is None else unknown)


async def test_an_analyzer_that_reports_a_rule_the_catalogue_lacks_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(conflicts, "RULE", "conflict-marker/undeclared")
    with pytest.raises(
        AssertionError, match=r"ConflictMarkerAnalyzer reported rules .*conflict-marker/undeclared"
    ):
        await run(ConflictMarkerAnalyzer(), under_review("README.md", "a\n", "a\n<<<<<<< HEAD\n"))


class _Recording(BuiltinReviewer):
    """The built-in reviewer, keeping every rule its findings name."""

    def __init__(self) -> None:
        super().__init__()
        self.rules: set[str] = set()

    async def review(self, context: PullContext) -> ReviewResult:
        result = await super().review(context)
        self.rules |= {f.rule for f in result.findings}
        return result


@pytest.mark.slow
async def test_every_finding_on_the_eval_corpus_names_a_catalogued_rule() -> None:
    """The analyzers as the engine runs them, in the execution boundary's children: the corpus's
    cases (``tests/fixtures/review_cases``) reviewed as ``python -m app eval`` reviews them."""
    reviewer = _Recording()
    async with offline(load_reviewer_settings({}), reviewer=reviewer) as bot:
        for case in load_cases(DEFAULT_CASES):
            assert (await run_case(case, reviewer, bot.review_range)).error is None
    assert reviewer.rules and uncatalogued(reviewer.rules) == set()
