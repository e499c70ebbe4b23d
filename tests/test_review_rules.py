"""The rule catalogue: each analyzer declares its rules, the engine reads them, and the README's
table is ``python -m app rules``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.review.analyzers import catalogue, default_analyzers, file_level_rules
from app.review.engine.rules import rules_markdown

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_table_is_the_generated_catalogue() -> None:
    text = README.read_text(encoding="utf-8")
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
        "hygiene/binary-file",
        "hygiene/large-file",
        "config/lint-rules-off",
        "config/lint-excludes",
        "config/bot-settings",
        "workflow/invalid-yaml",
    }
    assert all(rule.description and "\n" not in rule.description for _, rule in catalogue())
