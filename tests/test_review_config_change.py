"""What a pull request changes in the rules it is judged by (the ``config`` analyzer), and the
event a review posts when its analysis is incomplete. Table-driven: pure decisions."""

from __future__ import annotations

import pytest

from app.review.analyzers import AnalysisInput, FileUnderReview
from app.review.analyzers.config_change import EXCLUDES, RULES_OFF, SETTINGS, ConfigChangeAnalyzer
from app.review.core.diff import parse_patch
from app.review.core.lintconfig import lint_config
from app.review.core.model import FileContent, ReviewResult, ReviewSettings, Verdict
from app.review.output import render
from app.review.rounds.markers import Trigger
from tests.test_review_analyzers import changed


def content(text: str) -> FileContent:
    return FileContent(text=text, size=len(text.encode()))


async def findings(
    base: dict[str, str], head: dict[str, str], settings: ReviewSettings | None = None
) -> list[tuple[str, str, str]]:
    """(path, rule, message) of the analyzer's findings for these base and head files."""
    files = tuple(
        FileUnderReview(
            changed(path, base.get(path), text), parse_patch(changed(path, base.get(path), text).patch)
        )
        for path, text in head.items()
    )
    configs = {path: content(text) for path, text in base.items()}
    batch = AnalysisInput(
        files,
        (),
        {path: content(text) for path, text in head.items()},
        settings or ReviewSettings(),
        lint=lint_config(configs),
        configs=configs,
    )
    output = await ConfigChangeAnalyzer().analyse(batch)
    return [(f.path, f.rule, f.message) for f in output.findings]


ROOT_F = '[tool.ruff.lint]\nselect = ["F", "E9"]\n'
BLACK = "[tool.black]\nexclude = '''\n/(\n{}\n)/\n'''\n"
DIRS = ["    \\.eggs", "  | \\.git", "  | build", "  | dist"]


@pytest.mark.parametrize(
    ("base", "head", "expected"),
    [
        # No configuration before: revbot's defaults (E9, F) are what the PR turns off.
        (
            {},
            {"pyproject.toml": "[tool.ruff]\nselect = []\n"},
            [("pyproject.toml", RULES_OFF, "`E9`, `F` for the whole repository")],
        ),
        (
            {"pyproject.toml": ROOT_F},
            {"pyproject.toml": '[tool.ruff.lint]\nselect = ["F"]\n'},
            [("pyproject.toml", RULES_OFF, "`E9` for the whole")],
        ),
        (
            {"pyproject.toml": ROOT_F},
            {"pyproject.toml": ROOT_F + 'ignore = ["F821"]\n'},
            [("pyproject.toml", RULES_OFF, "`F821`")],
        ),
        (
            {"pyproject.toml": ROOT_F},
            {"pyproject.toml": ROOT_F + '[tool.ruff.lint.per-file-ignores]\n"src/*" = ["F"]\n'},
            [("pyproject.toml", RULES_OFF, "`F in src/*`")],
        ),
        # A nested configuration replaces the root's for its directory.
        (
            {"pyproject.toml": ROOT_F},
            {"src/ruff.toml": '[lint]\nselect = ["E9"]\n'},
            [("src/ruff.toml", RULES_OFF, "`F` for `src/`")],
        ),
        # More strictness is no finding.
        ({"pyproject.toml": ROOT_F}, {"pyproject.toml": ROOT_F + 'extend-select = ["B"]\n'}, []),
        (
            {"pyproject.toml": ROOT_F},
            {"pyproject.toml": '[tool.ruff]\nextend-exclude = ["gen"]\n' + ROOT_F},
            [("pyproject.toml", EXCLUDES, "`gen`")],
        ),
        (
            {},
            {".pre-commit-config.yaml": "exclude: '^legacy/'\nrepos: []\n"},
            [(".pre-commit-config.yaml", EXCLUDES, "`^legacy/`")],
        ),
        (
            {".pre-commit-config.yaml": "exclude: '^legacy/'\nrepos: []\n"},
            {".pre-commit-config.yaml": "exclude: '^legacy/'\nrepos: []\n# x\n"},
            [],
        ),
        (
            {},
            {"pyproject.toml": "[tool.black]\nextend-exclude = 'migrations'\n"},
            [("pyproject.toml", EXCLUDES, "`migrations`")],
        ),
        ({}, {"src/app.py": "x = 1\n"}, []),  # not a configuration file
        # "turns off E9" while the head's select holds "E": E covers E9.
        ({"pyproject.toml": ROOT_F}, {"pyproject.toml": '[tool.ruff.lint]\nselect = ["F", "E"]\n'}, []),
        # Ignoring E where E501 is selected keeps E501: the more specific selector wins.
        (
            {"pyproject.toml": '[tool.ruff.lint]\nselect = ["E501"]\n'},
            {"pyproject.toml": '[tool.ruff.lint]\nselect = ["E501"]\nignore = ["E"]\n'},
            [],
        ),
        # black's exclude, one verbose regex: one alternative removed, or re-indented, adds nothing.
        (
            {"pyproject.toml": BLACK.format("\n".join(DIRS))},
            {"pyproject.toml": BLACK.format("\n".join(DIRS[:-1]))},
            [],
        ),
        (
            {"pyproject.toml": BLACK.format("\n".join(DIRS))},
            {"pyproject.toml": BLACK.format("\n".join(" " + d for d in DIRS))},
            [],
        ),
        (
            {"pyproject.toml": BLACK.format("\n".join(DIRS))},
            {"pyproject.toml": BLACK.format("\n".join([*DIRS, "  | migrations"]))},
            [("pyproject.toml", EXCLUDES, "black exclude patterns `/migrations/`")],
        ),
    ],
)
async def test_what_a_pull_request_turns_off_is_a_concern(
    base: dict[str, str], head: dict[str, str], expected: list[tuple[str, str, str]]
) -> None:
    found = await findings(base, head)
    assert [(path, rule) for path, rule, _ in found] == [(path, rule) for path, rule, _ in expected]
    for (_, _, message), (_, _, part) in zip(found, expected, strict=True):
        assert part in message and "applies only once merged" in message


@pytest.mark.parametrize(
    ("text", "part"),
    [
        ("review:\n  paths_ignore: ['src/**']\n", ": it adds skip patterns `src/**`;"),
        ("review:\n  max_files: 3000\n", ": it raises review.max_files to 3000;"),
        ("review:\n  approve: true\n", ": it turns approval on;"),
        ("review:\n  auto: true\n", "(`.github/revbot.yml`); this review"),  # changed, nothing loosened
        ("a: &a [*a]\n", "(`.github/revbot.yml`); this review"),  # not readable: still reported
    ],
)
async def test_a_change_to_the_bots_settings_is_a_concern(text: str, part: str) -> None:
    settings = ReviewSettings(settings_path=".github/revbot.yml")
    [(path, rule, message)] = await findings({}, {".github/revbot.yml": text}, settings)
    assert (path, rule) == (".github/revbot.yml", SETTINGS)
    assert part in message


def result(verdict: Verdict, *, incomplete: bool) -> ReviewResult:
    return ReviewResult(verdict=verdict, summary="s", findings=(), incomplete=incomplete)


@pytest.mark.parametrize(
    ("verdict", "incomplete", "rereview", "event"),
    [
        (Verdict.APPROVE, False, False, "APPROVE"),
        (Verdict.COMMENT, True, False, "COMMENT"),
        (Verdict.COMMENT, False, True, "APPROVE"),  # a re-review re-decides: the block goes
        (Verdict.COMMENT, True, True, "COMMENT"),  # ... unless it could not confirm: the block stays
        (Verdict.REQUEST_CHANGES, True, True, "REQUEST_CHANGES"),
    ],
)
def test_an_incomplete_analysis_never_approves(
    verdict: Verdict, incomplete: bool, rereview: bool, event: str
) -> None:
    plan = render.plan_review(
        result(verdict, incomplete=incomplete),
        head_sha="b" * 40,
        commentable={},
        policy=render.Policy(approve=True, pr_by_bot=False),
        trigger=Trigger.DECOY,
        bot_name="revbot",
        rereview=render.Rereview(prior_head_sha="a" * 40) if rereview else None,
    )
    assert plan.event == event
    assert ("**Not approving:**" in plan.body) is (incomplete and event == "COMMENT")
    assert result(verdict, incomplete=incomplete).holds_block is incomplete
