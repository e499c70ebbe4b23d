"""The Python a change declares (``core.pyversion``): code valid for the versions the head
declares is never a syntax blocker, the change itself is a concern, and code that does not parse
for the declared versions is still blocked."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from app.review.core.model import FileContent, Severity, Verdict
from app.review.core.pyversion import declared_minimum, head_declared
from app.review.core.ruffinputs import RuffInput
from app.review.engine.builtin import BuiltinReviewer
from tests.test_review_analyzers import changed
from tests.test_review_engine import RecordingReader, pull


@pytest.mark.parametrize(
    ("ruff", "requires", "expected"),
    [
        ({"target-version": "py310"}, ">=3.8", (3, 10)),  # ruff's own setting wins
        ({}, ">=3.9", (3, 9)),
        (None, ">=3.8.1", (3, 8)),
        (None, "~=3.11", (3, 11)),
        (None, ">3.8", (3, 8)),  # PEP 440: 3.8.1 is above 3.8
        (None, ">=3.9,<4", (3, 9)),
        (None, "==3.12.*", (3, 12)),
        (None, "not a specifier", None),
        (None, None, None),
        ({"target-version": "nonsense"}, ">=3.9", (3, 9)),
    ],
)
def test_declared_minimum(
    ruff: dict[str, Any] | None, requires: str | None, expected: tuple[int, int] | None
) -> None:
    assert declared_minimum(ruff, requires) == expected


def text(value: str) -> FileContent:
    return FileContent(value, len(value))


BASE_PYPROJECT = RuffInput("pyproject.toml", {"line-length": 100}, ">=3.8")


@pytest.mark.parametrize(
    ("base", "head", "changed_paths", "settings", "requires", "change"),
    [
        # requires-python raised: ruff reads the head's; the change is reported.
        (
            BASE_PYPROJECT,
            '[project]\nrequires-python = ">=3.10"\n[tool.ruff]\nline-length = 120\n',
            {"pyproject.toml"},
            {"line-length": 100},  # every other setting stays the base's
            ">=3.10",
            ((3, 8), (3, 10), 2),
        ),
        # Not changed by the pull request: the base's, whatever the head reads like.
        (
            BASE_PYPROJECT,
            '[project]\nrequires-python = ">=3.12"\n',
            set(),
            {"line-length": 100},
            ">=3.8",
            None,
        ),
        # ruff's target-version changed in a ruff.toml.
        (
            RuffInput("ruff.toml", {"target-version": "py38"}),
            'target-version = "py311"\nselect = ["ALL"]\n',
            {"ruff.toml"},
            {"target-version": "py311"},
            None,
            ((3, 8), (3, 11), 1),
        ),
        # A head that is not TOML changes nothing.
        (BASE_PYPROJECT, "[project\n", {"pyproject.toml"}, {"line-length": 100}, ">=3.8", None),
        # A pyproject.toml that was no ruff configuration does not become one.
        (
            RuffInput("pyproject.toml", None, ">=3.8"),
            '[project]\nrequires-python = ">=3.9"\n[tool.ruff]\ntarget-version = "py312"\n',
            {"pyproject.toml"},
            None,
            ">=3.9",
            ((3, 8), (3, 9), 2),
        ),
    ],
)
def test_head_declared(
    base: RuffInput,
    head: str,
    changed_paths: set[str],
    settings: dict[str, Any] | None,
    requires: str | None,
    change: tuple[tuple[int, int], tuple[int, int], int] | None,
) -> None:
    inputs, changes = head_declared([base], {base.path: text(head)}, changed_paths)
    assert inputs[0].settings == settings and inputs[0].requires_python == requires
    assert [(c.before, c.after, c.line) for c in changes] == ([change] if change else [])


def test_the_change_says_which_way() -> None:
    _, [up] = head_declared(
        [BASE_PYPROJECT], {"pyproject.toml": text('[project]\nrequires-python=">=3.9"\n')}, {"pyproject.toml"}
    )
    _, [down] = head_declared(
        [RuffInput("pyproject.toml", None, ">=3.10")],
        {"pyproject.toml": text('[project]\nrequires-python=">=3.8"\n')},
        {"pyproject.toml"},
    )
    assert "raises the minimum Python from 3.8 to 3.9" in up.message
    assert "lowers the minimum Python from 3.10 to 3.8" in down.message


# --- the engine: a "Drop Python 3.8" pull request -------------------------------------------------

PYPROJECT_38 = '[project]\nname = "pkg"\nrequires-python = ">=3.8"\n\n[tool.ruff]\nline-length = 100\n'
PYPROJECT_310 = PYPROJECT_38.replace(">=3.8", ">=3.10")
CODE_BASE = "def f(x):\n    return x\n"
MODERN = (
    "def f(x):\n    match x:\n        case 1:\n            return 1\n"
    '    with (open("a") as a, open("b") as b):\n        return a.read() + b.read()\n'
)


def review_of(pyproject_head: str, code: str = MODERN) -> Any:
    files = [changed("pyproject.toml", PYPROJECT_38, pyproject_head), changed("pkg/m.py", CODE_BASE, code)]
    reader = RecordingReader({"pyproject.toml": pyproject_head, "pkg/m.py": code})

    # The lint configuration is read at the base: the pull request never chooses its rules.
    context = replace(pull(files, reader), read_base=RecordingReader({"pyproject.toml": PYPROJECT_38}))
    return BuiltinReviewer().review(context)


async def test_a_pull_request_that_raises_the_minimum_is_judged_by_it() -> None:
    result = await review_of(PYPROJECT_310)
    assert not [f for f in result.findings if f.rule == "python/syntax-error"]
    [concern] = [f for f in result.findings if f.rule == "python/declared-version"]
    assert concern.severity is Severity.CONCERN and concern.path == "pyproject.toml"
    assert "raises the minimum Python from 3.8 to 3.10" in concern.message
    assert result.verdict is Verdict.COMMENT  # a change of the supported Python is read by a person


async def test_without_the_raise_the_same_code_is_a_syntax_blocker() -> None:
    result = await review_of(PYPROJECT_38.replace("line-length = 100", "line-length = 99"))
    assert [f.rule for f in result.findings if f.severity is Severity.BLOCKER] == ["python/syntax-error"]
    assert result.verdict is Verdict.REQUEST_CHANGES


async def test_code_that_does_not_parse_for_the_declared_versions_is_still_blocked() -> None:
    # 3.9 declared: the parenthesised ``with`` is fine there, ``match`` is not.
    result = await review_of(PYPROJECT_38.replace(">=3.8", ">=3.9"))
    [blocker] = [f for f in result.findings if f.severity is Severity.BLOCKER]
    assert blocker.rule == "python/syntax-error" and "match" in blocker.message


# --- newer syntax in the repository's own tooling (black #4181: scripts/generate_schema.py) ------

MATCH = "def kind(value):\n    match value:\n        case 1:\n            return 'one'\n    return 'other'\n"


@pytest.mark.parametrize(
    ("path", "rule", "severity"),
    [
        ("scripts/generate_schema.py", "python/newer-syntax", Severity.CONCERN),
        ("docs/conf.py", "python/newer-syntax", Severity.CONCERN),
        ("src/black/schema.py", "python/syntax-error", Severity.BLOCKER),  # the package: its Python
        ("pkg/scripts/x.py", "python/syntax-error", Severity.BLOCKER),  # only the top directory counts
    ],
)
async def test_newer_syntax_outside_the_package_is_a_concern(
    path: str, rule: str, severity: Severity
) -> None:
    files = [changed(path, None, MATCH)]
    reader = RecordingReader({path: MATCH, "pyproject.toml": PYPROJECT_38})
    context = replace(pull(files, reader), read_base=RecordingReader({"pyproject.toml": PYPROJECT_38}))
    result = await BuiltinReviewer().review(context)
    [found] = [f for f in result.findings if f.rule.startswith("python/")]
    assert (found.rule, found.severity) == (rule, severity)


async def test_a_real_syntax_error_in_a_script_is_still_a_blocker() -> None:
    path = "scripts/tool.py"
    files = [changed(path, None, "def f(:\n    pass\n")]
    result = await BuiltinReviewer().review(pull(files, RecordingReader({path: "def f(:\n    pass\n"})))
    assert [(f.rule, f.severity) for f in result.findings] == [("python/syntax-error", Severity.BLOCKER)]
