"""flake8's configuration is lint scope (``core.flake8config``), read at the base like ruff's
and pre-commit's: its excludes leave files out, its per-file-ignores leave out ruff's findings of
the same codes, and a pull request that edits it is judged under the base's."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.review.analyzers.config_change import EXCLUDES, RULES_OFF
from app.review.core.flake8config import flake8_config
from app.review.core.lintconfig import LintConfig, config_paths, lint_config
from app.review.core.model import FileContent, RepoTree, ReviewResult, SkipCause, Verdict
from app.review.engine.builtin import BuiltinReviewer
from tests.test_review_analyzers import changed
from tests.test_review_config_change import findings
from tests.test_review_engine import RecordingReader, pull

URLLIB3_SETUP_CFG = """[flake8]
exclude=./docs/conf.py,./src/urllib3/packages/*
max-line-length=99

[metadata]
license_file = LICENSE.txt
"""


def text(value: str) -> FileContent:
    return FileContent(value, len(value.encode()))


def scope(files: dict[str, str]) -> LintConfig:
    return lint_config({path: text(value) for path, value in files.items()})


@pytest.mark.parametrize(
    ("files", "path", "source"),
    [
        # urllib3's setup.cfg, exactly: ``./`` anchors at the root, ``*`` crosses ``/``.
        ({"setup.cfg": URLLIB3_SETUP_CFG}, "src/urllib3/packages/six.py", "setup.cfg"),
        (
            {"setup.cfg": URLLIB3_SETUP_CFG},
            "src/urllib3/packages/ssl_match_hostname/_implementation.py",
            "setup.cfg",
        ),
        ({"setup.cfg": URLLIB3_SETUP_CFG}, "docs/conf.py", "setup.cfg"),
        ({"setup.cfg": URLLIB3_SETUP_CFG}, "src/urllib3/connection.py", None),
        ({"setup.cfg": URLLIB3_SETUP_CFG}, "other/docs/conf.py", None),  # anchored at the root
        # A bare name matches a file or directory name anywhere.
        (
            {".flake8": "[flake8]\nexclude = .git,build,migrations\n"},
            "app/migrations/0001_initial.py",
            ".flake8",
        ),
        ({".flake8": "[flake8]\nexclude = .git,build\n"}, "src/builder.py", None),
        # Globs, extend-exclude, newline-separated lists, underscores for dashes.
        (
            {"tox.ini": "[flake8]\nextend-exclude =\n    tests/data/*\n    *_pb2.py\n"},
            "proto/x_pb2.py",
            "tox.ini",
        ),
        ({"tox.ini": "[flake8]\nextend_exclude = tests/data/*\n"}, "tests/data/bad.py", "tox.ini"),
        # ``filename``: a Python file none of its patterns match is not linted.
        ({".flake8": "[flake8]\nfilename = ./src/*.py\n"}, "scripts/x.py", ".flake8"),
        ({".flake8": "[flake8]\nfilename = ./src/*.py\n"}, "src/pkg/x.py", None),
        # flake8's order: setup.cfg, then tox.ini, then .flake8; the first with a section wins.
        (
            {
                "setup.cfg": "[metadata]\nname = x\n",
                "tox.ini": "[flake8]\nexclude = gen\n",
                ".flake8": "[flake8]\n",
            },
            "gen/x.py",
            "tox.ini",
        ),
        # With a ``/`` (``./`` or a final one too) a pattern is a path from the root.
        ({".flake8": "[flake8]\nexclude = ./build\n"}, "build/x.py", ".flake8"),
        ({".flake8": "[flake8]\nexclude = ./build\n"}, "src/build/x.py", None),
        ({".flake8": "[flake8]\nexclude = build/\n"}, "src/build/x.py", None),
        # ``filename`` asks of the file itself, not of a directory above it.
        ({".flake8": "[flake8]\nfilename = ./src\n"}, "src/x.py", ".flake8"),
        ({".flake8": "[flake8]\nfilename = *.py\n"}, "src/x.py", None),
        # A file configparser cannot read is passed over, as flake8 does: the next one counts.
        ({"setup.cfg": "[flake8]\nexclude\n", "tox.ini": "[flake8]\nexclude = gen\n"}, "gen/x.py", "tox.ini"),
        # So is one without the section (that names it only in a comment); one with flake8's
        # local plugins only is flake8's configuration, and excludes nothing.
        (
            {"setup.cfg": "[metadata]\n# see [flake8] in tox.ini\n", "tox.ini": "[flake8]\nexclude = gen\n"},
            "gen/x.py",
            "tox.ini",
        ),
        (
            {
                "setup.cfg": "[flake8:local-plugins]\npaths = ./tools\n",
                "tox.ini": "[flake8]\nexclude = gen\n",
            },
            "gen/x.py",
            None,
        ),
        # Nothing outside the tree: ``..`` and absolute patterns match nothing.
        ({".flake8": "[flake8]\nexclude = ../*,/etc/*\n"}, "src/x.py", None),
        # A ruff configuration governs the file: ruff's scope is what the repository lints.
        (
            {"setup.cfg": URLLIB3_SETUP_CFG, "pyproject.toml": "[tool.ruff]\n"},
            "src/urllib3/packages/six.py",
            None,
        ),
    ],
)
def test_excludes(files: dict[str, str], path: str, source: str | None) -> None:
    config = scope(files)
    exclusion = config.excluded(path)
    assert (exclusion.source if exclusion is not None else None) == source


@pytest.mark.parametrize(
    ("value", "path", "code", "ignored"),
    [
        ("__init__.py:F401", "pkg/__init__.py", "F401", True),
        ("__init__.py:F401", "pkg/mod.py", "F401", False),
        ("tests/*: E501, F811", "tests/test_x.py", "F811", True),
        ("tests/*: E501, F811", "tests/test_x.py", "F401", False),
        ("\n    tests/*:E\n    docs/*:F,W\n", "docs/conf.py", "F821", True),  # a prefix ignores a family
        ("src/a.py src/b.py: F401", "src/b.py", "F401", True),  # several names, one colon
        ("*.pyi:E301,E302", "x.pyi", "E302", True),
        ("legacy/*:X100", "legacy/a.py", "X100", False),  # a plugin whose codes ruff does not share
        ("*.py:ASYNC100", "a.py", "ASYNC100", True),  # a code of more than three letters
        # flake8 asks of the file itself: a directory's name is no match.
        ("tests:F401", "tests/test_x.py", "F401", False),
        # Of the entries matching a file, only the most specific applies (the longest; a path
        # outranks a bare name; the first of equals); an entry without a code is no entry.
        ("__init__.py:F401\n    src/pkg/*:E501", "src/pkg/__init__.py", "F401", False),
        ("__init__.py:F401\n    src/pkg/*:E501", "pkg/__init__.py", "F401", True),
        ("tests/*:E501\n    tests/*:F811", "tests/t.py", "F811", False),
        ("src/pkg/__init__.py:\n    __init__.py:F401", "src/pkg/__init__.py", "F401", True),
        # Only ruff's codes that are flake8's: eradicate's is E800 in flake8, ERA001 in ruff;
        # refurb is no flake8 plugin; errmsg's EM101 is the same in both.
        ("*.py:E", "a.py", "ERA001", False),
        ("*.py:F", "a.py", "FURB101", False),
        ("*.py:E", "a.py", "EM101", True),
    ],
)
def test_per_file_ignores(value: str, path: str, code: str, ignored: bool) -> None:
    config = scope({".flake8": f"[flake8]\nper-file-ignores = {value}\n"})
    assert config.flake8_ignores(path, code) is ignored


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("[flake8]\nexclude = a\n[flake8]\nexclude = b\n", None),  # duplicates tolerated, as flake8 does
        ("[flake8]\nexclude\n", "could not be read"),  # a key without a value
        ("no section header\n[flake8]\n", "could not be read"),
        ("[flake8]\n" + "exclude = " + "x," * 200_000 + "\n", "was not read (over 256 KB)"),
        ("[metadata]\nname = x\n", None),
        ("[metadata]\n# see [flake8] in tox.ini\n", None),  # no section: not flake8's file
    ],
)
def test_a_file_that_cannot_be_read_is_a_note(body: str, problem: str | None) -> None:
    _, note = flake8_config({"setup.cfg": text(body)})
    assert (note is None) if problem is None else (note is not None and problem in note)


def test_the_flake8_files_at_the_root_are_read() -> None:
    wanted = config_paths(["src/a.py"], RepoTree.of({"src/a.py", "setup.cfg", "tox.ini", "sub/.flake8"}))
    assert {"setup.cfg", "tox.ini"} <= set(wanted) and "sub/.flake8" not in wanted


# --- what a pull request changes in it: a concern (the ``config`` analyzer) -----------------------


@pytest.mark.parametrize(
    ("base", "head", "expected"),
    [
        ({}, {"setup.cfg": URLLIB3_SETUP_CFG}, [("setup.cfg", EXCLUDES, "`./src/urllib3/packages/*`")]),
        (
            {"setup.cfg": "[flake8]\nexclude = a\n"},
            {"setup.cfg": "[flake8]\nexclude = a\nmax-line-length = 99\n"},
            [],
        ),
        (
            {".flake8": "[flake8]\nper-file-ignores = tests/*:E501\n"},
            {".flake8": "[flake8]\nper-file-ignores = tests/*:E501,F811\n"},
            [(".flake8", RULES_OFF, "flake8 per-file-ignores `tests/*: F811`")],
        ),
        (
            {},
            {"tox.ini": "[flake8]\nfilename = ./src/*.py\n"},
            [("tox.ini", EXCLUDES, "`filename: ./src/*.py`")],
        ),
        # flake8 reads setup.cfg's section, which the pull request left: tox.ini's is not read.
        (
            {"setup.cfg": "[flake8]\nexclude = a\n", "tox.ini": "[tox]\n"},
            {"tox.ini": "[tox]\n[flake8]\nexclude = gen\n"},
            [],
        ),
        ({}, {"sub/setup.cfg": "[flake8]\nexclude = x\n"}, []),  # not at the root: not flake8's
    ],
)
async def test_a_pull_request_that_widens_flake8_scope_is_a_concern(
    base: dict[str, str], head: dict[str, str], expected: list[tuple[str, str, str]]
) -> None:
    found = await findings(base, head)
    assert [(path, rule) for path, rule, _ in found] == [(path, rule) for path, rule, _ in expected]
    for (_, _, message), (_, _, part) in zip(found, expected, strict=True):
        assert part in message and "applies only once merged" in message


# --- the engine: urllib3's formatter pull request ------------------------------------------------

SIX_BASE = "if PY2:\n    text_type=unicode\n"
SIX_HEAD = "if PY2:\n    text_type = unicode\n    binary_type = str\n    string_types = (basestring,)\n"


async def review(setup_cfg_base: str, setup_cfg_head: str | None = None) -> ReviewResult:
    files = [changed("src/urllib3/packages/six.py", SIX_BASE, SIX_HEAD)]
    head = {"src/urllib3/packages/six.py": SIX_HEAD, "setup.cfg": setup_cfg_head or setup_cfg_base}
    if setup_cfg_head is not None:
        files.append(changed("setup.cfg", setup_cfg_base, setup_cfg_head))
    context = replace(
        pull(files, RecordingReader(head)), read_base=RecordingReader({"setup.cfg": setup_cfg_base})
    )
    return await BuiltinReviewer().review(context)


async def test_a_file_flake8_excludes_is_not_linted() -> None:
    result = await review(URLLIB3_SETUP_CFG)
    assert not [f for f in result.findings if f.rule.startswith("python/")]
    assert ("src/urllib3/packages/six.py", SkipCause.REPOSITORY) in {
        (s.path, s.cause) for s in result.skipped
    }
    assert "1 file not linted, as `setup.cfg` excludes it" in result.summary
    assert result.verdict is Verdict.APPROVE


async def test_a_pull_request_that_edits_the_flake8_config_is_judged_under_the_base() -> None:
    # The PR removes the exclude: the base's still holds. And one that adds it changes nothing.
    result = await review(URLLIB3_SETUP_CFG, "[flake8]\nmax-line-length=99\n")
    assert not [f for f in result.findings if f.rule.startswith("python/F")]
    blocked = await review("[flake8]\nmax-line-length=99\n", URLLIB3_SETUP_CFG)
    assert {(f.path, f.rule) for f in blocked.findings} >= {
        ("src/urllib3/packages/six.py", "python/F821"),
        ("setup.cfg", EXCLUDES),  # and the exclude it adds is a concern
    }
    assert blocked.verdict is Verdict.REQUEST_CHANGES
