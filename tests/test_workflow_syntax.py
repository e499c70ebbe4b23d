"""The workflow checks the bot does itself (zizmor audits what runs, not the syntax): a top-level
key GitHub's workflow syntax does not have means GitHub will not run the workflow."""

from __future__ import annotations

import pytest

from app.review.analyzers.workflows import UNKNOWN_KEY_RULE, unknown_keys
from app.review.core.model import Severity
from app.review.core.patterns import load_yaml
from tests.test_review_analyzers import under_review

GOOD = "name: ci\non: [push]\npermissions: {}\njobs:\n  a:\n    runs-on: ubuntu-latest\n"


@pytest.mark.parametrize(
    ("path", "text", "flagged"),
    [
        (".github/workflows/ci.yml", GOOD, []),
        (
            ".github/workflows/ci.yml",
            "name: x\n'on': push\nrun-name: r\nenv: {}\ndefaults: {}\nconcurrency: c\n",
            [],
        ),
        (".github/workflows/ci.yml", GOOD.replace("jobs:", "jobz:"), [("jobz", 4)]),
        (".github/workflows/ci.yml", GOOD + "steps:\n  - run: x\n", [("steps", 7)]),  # an indent lost
        (".github/workflows/ci.yml", GOOD + '"branding": {}\n', [("branding", 7)]),
        ("action.yml", "name: a\nruns:\n  using: node20\nbranding: {}\n", []),  # an action's keys differ
        ("sub/.github/workflows/x.yml", "foo: 1\n", []),  # not a workflow GitHub runs
    ],
)
def test_unknown_top_level_keys(path: str, text: str, flagged: list[tuple[str, int]]) -> None:
    item = under_review(path, None, text, read=True)
    found = unknown_keys(item, load_yaml(text))
    assert [(f.message.split("`")[1], f.line) for f in found] == flagged
    assert all(f.rule == UNKNOWN_KEY_RULE and f.severity is Severity.BLOCKER and f.docs for f in found)
