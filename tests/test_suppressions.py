"""The suppressions a pull request adds, told from the base's: table-driven (end to end in
tests/test_green_suppressions.py)."""

from __future__ import annotations

import re

import pytest

from app.review.analyzers.suppressions import (
    HADOLINT_DIRECTIVE,
    SHELLCHECK_DIRECTIVE,
    adds_noqa,
    noqa_added_for,
    suppressed_by_pull_request,
    without_added_directives,
    zizmor_ignore_added,
)
from app.review.core.model import Finding, Severity


@pytest.mark.parametrize(
    ("added", "expected"),
    [
        ({1: "x = 1"}, False),
        ({1: "x = y  # noqa"}, True),
        ({1: "x = y  # NOQA: F821"}, True),
        ({1: "# ruff: noqa"}, True),
        ({1: "# flake8: noqa"}, True),
        ({1: "x = 'noqa'"}, False),  # a word in a string is no directive
    ],
)
def test_a_second_run_only_where_the_pull_request_adds_a_noqa(added: dict[int, str], expected: bool) -> None:
    assert adds_noqa(added) is expected


@pytest.mark.parametrize(
    ("rows", "added", "line", "directive"),
    [
        (["x = y  # noqa"], {1: "x = y  # noqa"}, 1, "`# noqa` (line 1)"),
        (["# ruff: noqa", "x = y"], {1: "# ruff: noqa", 2: "x = y"}, 2, "`# ruff: noqa` (line 1)"),
        (["# ruff: noqa", "x = y"], {2: "x = y"}, 2, None),  # the base's file-level directive
        (["x = y  # noqa"], {}, 1, None),  # the base's line
        (["x = y  # noqa", "z = w"], {1: "x = y  # noqa", 2: "z = w"}, 2, None),  # another line's
    ],
    ids=["line", "file-added", "file-at-base", "line-at-base", "other-line"],
)
def test_the_directive_the_pull_request_added(
    rows: list[str], added: dict[int, str], line: int, directive: str | None
) -> None:
    assert noqa_added_for(rows, added, line) == directive


@pytest.mark.parametrize(
    ("added", "line", "expected"),
    [
        (
            {3: "  pull_request_target: # zizmor: ignore[dangerous-triggers]"},
            3,
            "`# zizmor: ignore` (line 3)",
        ),
        ({3: "  pull_request_target:"}, 3, None),
        ({}, 3, None),  # the base's comment: honoured
    ],
)
def test_a_zizmor_ignore_the_pull_request_added(
    added: dict[int, str], line: int, expected: str | None
) -> None:
    assert zizmor_ignore_added(added, line) == expected


@pytest.mark.parametrize(
    ("severity", "flagged"),
    [(Severity.BLOCKER, True), (Severity.CONCERN, False), (Severity.NIT, False)],
)
def test_only_a_blocker_outlives_the_pull_requests_suppression(severity: Severity, flagged: bool) -> None:
    hidden = Finding("a.py", 1, severity, "python/F821", "Undefined name `y` (F821)", "fp")
    found = suppressed_by_pull_request(hidden, "`# noqa` (line 1)")
    assert (found is not None) is flagged
    if found is not None:
        assert found.message.startswith("Suppressed by this pull request (`# noqa` (line 1)), yet a blocker")
        assert (found.severity, found.fingerprint) == (hidden.severity, hidden.fingerprint)


@pytest.mark.parametrize(
    ("text", "added", "directive", "expected"),
    [
        (
            "#!/bin/sh\n# shellcheck disable=SC2086\necho $1\n",
            {2: "", 3: ""},
            SHELLCHECK_DIRECTIVE,
            "#!/bin/sh\n# inert-for-the-bot disable=SC2086\necho $1\n",
        ),
        (
            "#!/bin/sh\n# shellcheck disable=SC2086\necho $1\n",
            {3: ""},
            SHELLCHECK_DIRECTIVE,
            None,
        ),  # the base's
        ("# shellcheck source=lib.sh\n", {1: ""}, SHELLCHECK_DIRECTIVE, None),  # not a suppression
        (
            "FROM x\n# hadolint ignore=DL3008\nRUN y\n",
            {2: ""},
            HADOLINT_DIRECTIVE,
            "FROM x\n# inert-for-the-bot ignore=DL3008\nRUN y\n",
        ),
    ],
    ids=["added", "at-base", "other-directive", "hadolint"],
)
def test_the_directives_the_pull_request_added_are_made_inert_for_a_second_run(
    text: str, added: dict[int, str], directive: re.Pattern[str], expected: str | None
) -> None:
    rewritten = without_added_directives(text, added, directive)
    assert rewritten == expected
    if rewritten is not None:
        assert rewritten.count("\n") == text.count("\n")  # every line number stays
