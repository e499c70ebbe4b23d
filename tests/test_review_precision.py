"""Zero false blockers: one small synthetic repository per false-positive cause found on real
history (issue 10), each reviewed exactly as ``python -m app review --git``/``--commits`` does
(a real git repository, the engine, ruff). Each test also checks the finding is still made where it
should be, so none of them passes by the reviewer going quiet.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.offline import offline
from app.review.core.lintconfig import (
    Exclusion,
    LintConfig,
    RuffConfigFile,
    RuffPin,
    lint_config,
    missing_extends,
    ruff_glob_match,
)
from app.review.core.model import FileContent, ReviewResult, Severity
from app.review.engine.builtin import BuiltinReviewer
from app.review.engine.ruffpins import RuffPins
from app.review.isolation.pool import ProcessPool
from app.review.measure.history import History, review_commits
from app.review.measure.local import context_from_git
from app.settings.config import load_reviewer_settings

ROOT = Path(__file__).resolve().parent.parent


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True)
    return done.stdout


def write(repo: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8", newline="")


def repo_with(tmp_path: Path, base: dict[str, str], change: dict[str, str]) -> Path:
    """A repository with two commits: ``base``, then ``change`` on top."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Dev")
    write(repo, base or {"README.md": "# r\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    write(repo, change)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "change")
    return repo


async def review(repo: Path) -> ReviewResult:
    return await BuiltinReviewer().review(await context_from_git(repo, "HEAD~1", "HEAD"))


def rules(result: ReviewResult) -> set[tuple[str, str, Severity]]:
    return {(f.path, f.rule, f.severity) for f in result.findings}


def reasons(result: ReviewResult) -> dict[str, str]:
    return {s.path: s.reason for s in result.skipped}


# --- the repository's own scope -----------------------------------------------------------------

PRE_COMMIT = """\
exclude: ^(profiling/|tests/data/)
repos:
  - repo: https://github.com/pycqa/flake8
    rev: 7.1.0
    hooks:
      - id: flake8
        exclude: ^src/vendored/
"""
FIXTURE = "print(undefined_name)\nx = [\n"  # undefined names, even a syntax error: the point of a fixture


@pytest.mark.slow
async def test_fixture_directories_excluded_by_pre_commit_are_not_linted(tmp_path: Path) -> None:
    repo = repo_with(
        tmp_path,
        {".pre-commit-config.yaml": PRE_COMMIT, "src/pkg/__init__.py": ""},
        {
            "tests/data/cases/weird.py": FIXTURE,
            "src/vendored/old.py": "import os\nprint(undefined_name)\n",
            "src/pkg/mod.py": "def f():\n    return undefined_name\n",
        },
    )
    result = await review(repo)
    assert rules(result) == {("src/pkg/mod.py", "python/F821", Severity.BLOCKER)}  # still found elsewhere
    why = reasons(result)
    assert why["tests/data/cases/weird.py"] == (
        "not linted: excluded by the repository's config "
        "(`.pre-commit-config.yaml`: `^(profiling/|tests/data/)`)"
    )
    assert why["src/vendored/old.py"].endswith("(`.pre-commit-config.yaml`: `^src/vendored/`)")
    assert "2 files not linted, as `.pre-commit-config.yaml` excludes them" in result.summary


@pytest.mark.slow
async def test_the_formatter_exclude_applies_when_there_is_no_linter_config(tmp_path: Path) -> None:
    pyproject = "[tool.black]\nextend-exclude = '''\n/(\n    tests/data/\n  | profiling/\n)\n'''\n"
    repo = repo_with(tmp_path, {"pyproject.toml": pyproject}, {"tests/data/a.py": FIXTURE, "b.py": FIXTURE})
    result = await review(repo)
    assert {(p, r) for p, r, _ in rules(result)} == {("b.py", "python/syntax-error"), ("b.py", "debug/print")}
    assert reasons(result)["tests/data/a.py"].startswith(
        "not linted: excluded by the repository's config (`pyproject.toml`:"
    )


@pytest.mark.slow
async def test_ruff_excludes_apply_per_config_file(tmp_path: Path) -> None:
    repo = repo_with(
        tmp_path,
        {
            "pyproject.toml": '[tool.ruff]\nextend-exclude = ["legacy"]\n',
            "sub/ruff.toml": 'extend-exclude = ["gen/*.py"]\n',
        },
        {
            "legacy/a.py": FIXTURE,
            "sub/gen/b.py": FIXTURE,
            "sub/legacy/c.py": FIXTURE,  # "legacy" is in the root config, which sub/ruff.toml replaces
        },
    )
    result = await review(repo)
    why = reasons(result)
    assert why["legacy/a.py"].endswith("(`pyproject.toml`: `legacy`)")
    assert why["sub/gen/b.py"].endswith("(`sub/ruff.toml`: `gen/*.py`)")
    assert {(p, r) for p, r, _ in rules(result)} == {
        ("sub/legacy/c.py", "python/syntax-error"),
        ("sub/legacy/c.py", "debug/print"),
    }


# --- ruff sees what a checkout sees -------------------------------------------------------------


@pytest.mark.slow
async def test_a_nested_ruff_config_governs_its_subproject(tmp_path: Path) -> None:
    text = "def f():\n    return 1\n"  # no docstrings: D103 where D is selected
    repo = repo_with(
        tmp_path,
        {
            "pyproject.toml": '[tool.ruff.lint]\nselect = ["D1"]\n',
            "core/pyproject.toml": '[project]\nname = "core"\n\n[tool.ruff.lint]\nselect = ["F"]\n',
        },
        {"core/python/core/a.py": text, "app/b.py": text},
    )
    result = await review(repo)
    assert {(p, r) for p, r, _ in rules(result)} == {("app/b.py", "python/D100"), ("app/b.py", "python/D103")}
    assert "with the repository's `core/pyproject.toml`, `pyproject.toml`" in result.summary


IMPORTS = "import os\n\nimport requests\n\nfrom mypkg import util\n\nprint(os, requests, util)\n"


@pytest.mark.slow
async def test_first_party_imports_classify_as_in_the_repository(tmp_path: Path) -> None:
    config = '[tool.ruff]\nsrc = ["src"]\n\n[tool.ruff.lint]\nselect = ["I"]\n'
    repo = repo_with(
        tmp_path,
        {"pyproject.toml": config, "src/mypkg/__init__.py": "", "src/mypkg/util.py": "X = 1\n"},
        {"tests/test_util.py": IMPORTS},
    )
    assert rules(await review(repo)) == set()
    # Without the layout (only the changed file), ruff cannot know mypkg is first-party: the
    # finding this test guards against.
    context = await context_from_git(repo, "HEAD~1", "HEAD")
    blind = await BuiltinReviewer().review(dataclasses.replace(context, tree=None))
    assert {r for _, r, _ in rules(blind)} == {"python/I001"}


@pytest.mark.slow
async def test_rules_newer_than_the_pinned_ruff_are_not_reported(tmp_path: Path) -> None:
    pre_commit = (
        "repos:\n  - repo: https://github.com/astral-sh/ruff-pre-commit\n"
        "    rev: 3a1b2c3d4e5f60718293a4b5c6d7e8f901234567  # frozen: v0.1.0\n    hooks:\n      - id: ruff\n"
    )
    config = '[tool.ruff.lint]\nselect = ["ALL"]\nignore = ["D", "ANN", "CPY", "INP"]\n'
    six = '"""M."""\n\n\ndef f(a, b, c, d, e, g):\n    """F."""\n    return a + b + c + d + e + g\n'
    repo = repo_with(
        tmp_path, {".pre-commit-config.yaml": pre_commit, "pyproject.toml": config}, {"m.py": six}
    )
    result = await review(repo)
    found = {r for _, r, _ in rules(result)}
    assert "python/PLR0913" in found  # too many arguments: a rule ruff 0.1.0 had
    assert "python/PLR0917" not in found  # too many positional arguments: stable only since 0.16
    assert "rules newer than the pinned ruff 0.1.0 (`.pre-commit-config.yaml`) not reported" in result.summary
    assert "left out" in result.summary


@pytest.mark.slow
async def test_the_pin_from_a_dev_dependency(tmp_path: Path) -> None:
    config = '[dependency-groups]\ndev = ["ruff==0.1.0", "pytest"]\n\n[tool.ruff.lint]\nselect = ["PLR"]\n'
    repo = repo_with(
        tmp_path, {"pyproject.toml": config}, {"m.py": "def f(a, b, c, d, e, g):\n    return a\n"}
    )
    result = await review(repo)
    assert {r for _, r, _ in rules(result)} == {"python/PLR0913"}
    assert "pinned ruff 0.1.0 (`pyproject.toml`)" in result.summary


# --- severities that mean what they say ---------------------------------------------------------

LIBRARY = "import sys\n\n\ndef handle(request):\n    {line}\n    return request, sys.argv\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("print(request, file=sys.stderr)  # noqa: T201", set()),
        ("print(request)  # noqa", set()),
        ("print(request)  # noqa: T20", set()),
        ("print(request)  # noqa: E501", {("src/lib/app.py", "debug/print", Severity.CONCERN)}),
        ("print(request)", {("src/lib/app.py", "debug/print", Severity.CONCERN)}),
        ("breakpoint()  # noqa: T100", set()),
        ("breakpoint()", {("src/lib/app.py", "debug/breakpoint", Severity.CONCERN)}),
    ],
)
async def test_noqa_silences_the_bots_own_python_rules(
    tmp_path: Path, line: str, expected: set[object]
) -> None:
    repo = repo_with(tmp_path, {}, {"src/lib/app.py": LIBRARY.format(line=line)})
    assert rules(await review(repo)) == expected


@pytest.mark.slow
@pytest.mark.parametrize(
    "path",
    ["src/lib/__main__.py", "src/lib/cli.py", "scripts/run.py", "tests/test_app.py", "app/demo/story.py"],
)
async def test_print_is_fine_where_printing_is_the_point(tmp_path: Path, path: str) -> None:
    repo = repo_with(tmp_path, {}, {path: LIBRARY.format(line="print(request)")})
    assert rules(await review(repo)) == set()


@pytest.mark.slow
async def test_a_symlink_and_a_minified_svg_need_no_final_newline(tmp_path: Path) -> None:
    svg = '<svg xmlns="http://www.w3.org/2000/svg">' + '<path d="M0 0h24v24H0z"/>' * 30 + "</svg>"
    repo = repo_with(
        tmp_path, {"docs/guide.md": "# guide\n"}, {"assets/icon.svg": svg, "notes.txt": "no newline"}
    )
    os.symlink("docs/guide.md", repo / "GUIDE.md")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "link")
    result = await BuiltinReviewer().review(await context_from_git(repo, "HEAD~2", "HEAD"))
    assert {(p, r) for p, r, _ in rules(result)} == {("notes.txt", "hygiene/no-newline-at-eof")}


@pytest.mark.slow
async def test_a_test_key_is_a_concern_and_a_committed_key_a_blocker(
    tmp_path: Path, private_key_pem: str
) -> None:
    repo = repo_with(
        tmp_path, {}, {"tests/keys/testkey_rsa.pem": private_key_pem, "deploy/prod.pem": private_key_pem}
    )
    result = await review(repo)
    assert rules(result) == {
        ("tests/keys/testkey_rsa.pem", "secrets/private-key", Severity.CONCERN),
        ("deploy/prod.pem", "secrets/private-key", Severity.BLOCKER),
    }
    [concern] = [f for f in result.findings if f.severity is Severity.CONCERN]
    assert "test fixture or documentation" in concern.message


# --- the measuring tool -------------------------------------------------------------------------


@pytest.mark.slow
def test_review_commits_prints_a_line_per_commit_then_totals(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, {"a.py": "x = 1\n"}, {"a.py": "x = 1\ny = undefined_name\n"})
    write(repo, {"b.py": "def f():\n    print(1)\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "print")
    done = subprocess.run(
        [sys.executable, "-m", "app", "review", "--commits", "5", "--repo", str(repo)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[1:5] == ["COMMENT", "0b", "1c", "0n"] and lines[0].endswith("print")
    assert lines[1].split()[1:5] == ["REQUEST_CHANGES", "1b", "0c", "0n"]
    assert lines[2].split()[1] == "ERROR" and "root commit" in lines[2]
    assert "2 commits reviewed, 1 could not be; verdicts: 1 COMMENT, 1 REQUEST_CHANGES" in done.stdout
    assert "per 100 commits: 50.0 blockers, 50.0 concerns, 0.0 nits" in done.stdout
    assert "time per commit: p50 " in done.stdout
    assert "  blocker  python/F821  1" in done.stdout and "  concern  debug/print  1" in done.stdout
    as_json = subprocess.run(
        [sys.executable, "-m", "app", "review", "--commits", "2", "--repo", str(repo), "--format", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    data = json.loads(as_json.stdout)
    assert data["totals"]["findings"] == {"blocker": 1, "concern": 1, "nit": 0}
    assert [c["verdict"] for c in data["commits"]] == ["COMMENT", "REQUEST_CHANGES"]


@pytest.mark.slow
async def test_history_totals_use_an_injected_clock(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, {"a.py": "x = 1\n"}, {"a.py": "x = 2\n"})
    ticks = iter([0.0, 0.5, 1.0, 3.0])
    history = History()
    async with offline(load_reviewer_settings({}), reviewer=BuiltinReviewer()) as bot:
        async for item in review_commits(repo, count=2, review=bot.review_range, clock=lambda: next(ticks)):
            history.add(item)
    totals = history.totals()
    assert totals["seconds"] == {"total": 0.5, "p50": 0.5, "max": 0.5}
    assert (totals["reviewed"], totals["errors"]) == (1, 1)


@pytest.mark.slow
def test_a_bad_commits_argument_is_a_clear_error(tmp_path: Path) -> None:
    for args in (["--commits", "0"], ["--commits", "3", "--git", "a..b"]):
        done = subprocess.run(
            [sys.executable, "-m", "app", "review", *args, "--repo", str(tmp_path)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        )
        assert done.returncode == 2
        assert done.stderr.startswith(("revbot: --commits expects", "revbot: with --commits"))


# --- the lint configuration, as pure functions ----------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        (".venv", "a/.venv/lib/x.py", True),
        ("foo_*.py", "deep/foo_bar.py", True),
        ("legacy", "legacy/a.py", True),
        ("gen/*.py", "gen/a.py", True),
        ("gen/*.py", "sub/gen/a.py", False),  # anchored at the config's directory
        ("tests/data", "tests/data/x/y.py", True),
        ("tests/data/", "src/tests/data/y.py", False),
        ("build", "src/builder.py", False),
    ],
)
def test_ruff_exclude_patterns(pattern: str, path: str, matches: bool) -> None:
    assert ruff_glob_match(pattern, path) is matches


def test_lint_config_reads_pins_hooks_and_broken_files() -> None:
    def c(text: str) -> FileContent:
        return FileContent(text, len(text))

    config = lint_config(
        {
            ".pre-commit-config.yaml": c(
                "repos:\n  - repo: https://github.com/astral-sh/ruff-pre-commit\n    rev: v0.4.1\n"
                "    hooks:\n      - id: ruff\n        exclude: ^docs/\n      - id: ruff-format\n"
            ),
            "pyproject.toml": c('[tool.ruff]\nextend = "configs/base.toml"\n'),
            "configs/base.toml": c('extend-exclude = ["generated"]\n'),
            "bad/ruff.toml": c("line-length = \n"),
            "other/pyproject.toml": c("[project]\nname = 'x'\n"),
        }
    )
    assert config.pin is not None and (config.pin.label, config.pin.source) == (
        "0.4.1",
        ".pre-commit-config.yaml",
    )
    assert config.excluded("docs/conf.py") == Exclusion(".pre-commit-config.yaml", "^docs/")
    assert config.excluded("generated/x.py") == Exclusion("configs/base.toml", "generated")
    assert config.excluded("src/x.py") is None
    assert [p for p in config.problems if p.startswith("`bad/ruff.toml` is not valid TOML")]
    assert set(config.ruff_configs) == {"pyproject.toml", "configs/base.toml"}
    assert LintConfig(ruff_configs={"a/ruff.toml": RuffConfigFile("a/ruff.toml", "", {})}).governing(
        "a/b/c.py"
    )


def test_an_extend_outside_the_repository_is_not_followed() -> None:
    contents = {"ruff.toml": FileContent('extend = "../../etc/base.toml"\nextend-exclude = ["gen"]\n', 10)}
    assert missing_extends(contents) == []  # nothing outside the repository is asked for
    config = lint_config(contents)
    assert config.excluded("gen/x.py") == Exclusion("ruff.toml", "gen")


# --- on GitHub: the layout from one tree read -----------------------------------------------------


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_pull_request_reads_the_tree_once_however_many_files(tmp_path: Path) -> None:
    from tests.harness import BotHarness
    from tests.test_review_cli import review_pull_with_the_cli

    bot = BotHarness(tmp_path)
    base = {
        "README.md": "# widgets\n",
        ".pre-commit-config.yaml": PRE_COMMIT,
        "pyproject.toml": '[tool.ruff]\nsrc = ["src"]\n\n[tool.ruff.lint]\nselect = ["F", "I"]\n',
        "src/mypkg/__init__.py": "",
        "src/mypkg/util.py": "X = 1\n",
    }
    head: dict[str, str | None] = {f"tests/test_{n:03}.py": IMPORTS for n in range(120)}
    head["tests/data/cases/broken.py"] = FIXTURE
    number = bot.open_pull(head, base_files=base, author="alice")
    data, before = await review_pull_with_the_cli(bot, number)
    assert data["verdict"] == "APPROVE", data["findings"][:3]  # no I001: mypkg is first-party
    assert {s["path"]: s["reason"] for s in data["skipped"]}["tests/data/cases/broken.py"].startswith(
        "not linted: excluded by the repository's config (`.pre-commit-config.yaml`"
    )
    calls = bot.fake.calls[before:]
    trees = [c for c in calls if "/git/trees/" in c.path]
    assert len(trees) == 1 and trees[0].query == {"recursive": "1"} and trees[0].status == 200
    # Pages, not files: the pull request's state (one GraphQL request: the PR, its reviews, the
    # settings file and the owner's .github fallback, the conversation), 2 pages of files, the
    # tree, and one batch of the 2 config files, read at the base. The 121 added files' contents
    # are their patches (each checked against its blob id): no read.
    assert len(calls) == 1 + 2 + 1 + 1, [(c.method, c.path) for c in calls]
    bot.assert_conforms()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("base", "added", "expected"),
    [
        ("def show(x):\n    print(x)\n", "def more(y):\n    print(y)\n", set()),  # the module already prints
        ("", "def a():\n    print(1)\n    print(2)\n    print(3)\n", {Severity.NIT}),  # output on purpose?
        ("", "def a():\n    print(1)\n", {Severity.CONCERN}),  # a leftover
    ],
)
async def test_prints_in_a_module_that_prints_are_its_job(
    tmp_path: Path, base: str, added: str, expected: set[Severity]
) -> None:
    repo = repo_with(tmp_path, {"src/lib/report.py": base}, {"src/lib/report.py": base + "\n\n" + added})
    assert {s for _, r, s in rules(await review(repo)) if r == "debug/print"} == expected


@pytest.mark.parametrize(
    ("config", "path", "source_pattern"),
    [
        ("files: ^src/\nrepos: []\n", "tools/x.py", "files: ^src/"),
        ("files: ^src/\nrepos: []\n", "src/x.py", None),
        (
            "repos:\n  - repo: local\n    hooks:\n      - id: ruff\n        files: ^lib/\n",
            "app/x.py",
            "files: ^lib/",
        ),
        (  # two lint hooks: left out only when neither looks at it
            "repos:\n  - repo: a\n    hooks:\n      - id: flake8\n        exclude: ^gen/\n"
            "  - repo: b\n    hooks:\n      - id: pylint\n",
            "gen/x.py",
            None,
        ),
        (
            "exclude: |\n  (?x)^(\n      a/|\n      b/\n  )\nrepos: []\n",
            "b/x.py",
            "(?x)^(\n    a/|\n    b/\n)\n",
        ),
    ],
)
def test_pre_commit_scope(config: str, path: str, source_pattern: str | None) -> None:
    found = lint_config({".pre-commit-config.yaml": FileContent(config, len(config))}).excluded(path)
    assert (found.pattern if found else None) == source_pattern


# --- running the pinned ruff itself ---------------------------------------------------------------

PINNED_PYPROJECT = '[dependency-groups]\ndev = ["ruff==0.1.0"]\n\n[tool.ruff.lint]\nselect = ["PLR"]\n'
SIX_ARGS = "def f(a, b, c, d, e, g):\n    return a\n"


def fake_installer(tmp_path: Path, real_ruff: str) -> list[str]:
    """Stands in for ``pip install --target DIR ruff==X``: writes DIR/bin/ruff, a wrapper that says
    it is version X and runs the real ruff (so the test needs no network)."""
    script = tmp_path / "fake_pip.py"
    script.write_text(
        "import os, sys\n"
        "target = sys.argv[sys.argv.index('--target') + 1]\n"
        "version = sys.argv[-1].split('==')[1]\n"
        "os.makedirs(os.path.join(target, 'bin'))\n"
        "path = os.path.join(target, 'bin', 'ruff')\n"
        "with open(path, 'w') as f:\n"
        "    f.write('#!/bin/sh\\nif [ \"$1\" = --version ]; then echo ruff ' + version + '; exit 0; fi\\n'\n"
        f"            'exec {real_ruff} \"$@\"\\n')\n"
        "os.chmod(path, 0o755)\n"
    )
    return [sys.executable, str(script)]


@pytest.mark.slow
async def test_the_pinned_ruff_is_installed_once_and_run(tmp_path: Path) -> None:
    from app.review.analyzers.ruff_runner import find_ruff

    repo = repo_with(tmp_path, {"pyproject.toml": PINNED_PYPROJECT}, {"m.py": SIX_ARGS})
    versions = tmp_path / "ruffs"
    pins = RuffPins(versions, installer=fake_installer(tmp_path, find_ruff()[0]))
    # The children read the pinned ruffs' directory, as ``REVIEW_RUFF_VERSIONS`` is for ``serve``.
    boundary = ProcessPool(readable=(versions,))
    try:
        for _ in range(2):
            reviewer = BuiltinReviewer(ruff_pins=pins, boundary=boundary)
            result = await reviewer.review(await context_from_git(repo, "HEAD~1", "HEAD"))
            assert result.summary.endswith(
                "Python checked by ruff 0.1.0 with the repository's `pyproject.toml`; "
                "likely-bug checks (T10, PLE, B006, B015, B018) run."
            )
            # The pinned ruff ran (here a stand-in that reports PLR0917 too): nothing was filtered.
            assert {r for _, r, _ in rules(result)} == {"python/PLR0913", "python/PLR0917"}
    finally:
        boundary.close()
    assert sorted(p.name for p in versions.iterdir()) == ["0.1.0"]  # installed once, no staging left


@pytest.mark.slow
async def test_a_pinned_ruff_that_cannot_be_installed_falls_back_to_the_metadata(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, {"pyproject.toml": PINNED_PYPROJECT}, {"m.py": SIX_ARGS})
    failing = [sys.executable, "-c", "raise SystemExit('no network')"]
    pins = RuffPins(tmp_path / "ruffs", installer=failing)
    result = await BuiltinReviewer(ruff_pins=pins).review(await context_from_git(repo, "HEAD~1", "HEAD"))
    assert {r for _, r, _ in rules(result)} == {"python/PLR0913"}
    assert "the pinned ruff 0.1.0 could not be installed" in result.summary.lower()
    assert list((tmp_path / "ruffs").iterdir()) == []


@pytest.mark.parametrize("labels", [("0.4.1", "0.4.1.0", "v0.4.1.0.0")])
async def test_one_version_is_one_install_and_at_most_keep_versions_stay(
    tmp_path: Path, labels: tuple[str, ...]
) -> None:
    from app.review.analyzers.ruff_runner import find_ruff
    from app.review.core.lintconfig import RuffPin, version_tuple

    installs = tmp_path / "installs.log"
    script = fake_installer(tmp_path, find_ruff()[0])
    counting = [
        sys.executable,
        "-c",
        f"import sys; open({str(installs)!r}, 'a').write('x'); "
        f"sys.argv = sys.argv[1:]; exec(open(sys.argv[0]).read())",
        script[1],
    ]
    pins = RuffPins(tmp_path / "ruffs", keep=2, installer=counting)
    for label in labels:
        version = version_tuple(label)
        assert version is not None
        async with pins.lease(RuffPin(version, "pyproject.toml")) as command:
            assert command is not None
    assert installs.read_text() == "x"  # three spellings, one version, one install
    assert [p.name for p in (tmp_path / "ruffs").iterdir()] == ["0.4.1"]
    for label in ("0.5.0", "0.6.0"):
        async with pins.lease(RuffPin(version_tuple(label) or (), "pyproject.toml")):
            pass
    assert sorted(p.name for p in (tmp_path / "ruffs").iterdir()) == ["0.5.0", "0.6.0"]  # LRU: 0.4.1 went


async def test_a_pinned_ruff_larger_than_the_bound_is_not_kept(tmp_path: Path) -> None:
    from app.review.analyzers.ruff_runner import find_ruff
    from app.review.core.lintconfig import RuffPin

    pins = RuffPins(tmp_path / "ruffs", installer=fake_installer(tmp_path, find_ruff()[0]), max_bytes=10)
    async with pins.lease(RuffPin((0, 5), "pyproject.toml")) as command:
        assert command is None
    assert list((tmp_path / "ruffs").iterdir()) == []


def pin(label: str) -> RuffPin:
    from app.review.core.lintconfig import version_tuple

    version = version_tuple(label)
    assert version is not None
    return RuffPin(version, "pyproject.toml")


def logging_installer(tmp_path: Path, log: Path, *, held: str = "", gate: Path | None = None) -> list[str]:
    """The fake pip, writing ``start X`` and ``end X`` to ``log`` around each install; the install
    of version ``held`` waits at ``gate`` (``Gate``'s FIFOs: ``entered``, then ``release``)."""
    from app.review.analyzers.ruff_runner import find_ruff

    script = fake_installer(tmp_path, find_ruff()[0])[1]
    entered, release = (str(gate / "entered"), str(gate / "release")) if gate else ("", "")
    code = (
        "import sys\n"
        "version = sys.argv[-1].split('==')[1]\n"
        f"open({str(log)!r}, 'a').write('start ' + version + '\\n')\n"
        f"if version == {held!r}:\n"
        f"    open({entered!r}, 'w').close()\n"
        f"    open({release!r}).read()\n"
        "sys.argv = sys.argv[1:]\n"
        "exec(open(sys.argv[0]).read())\n"
        f"open({str(log)!r}, 'a').write('end ' + version + '\\n')\n"
    )
    return [sys.executable, "-c", code, script]


async def test_a_version_a_review_holds_is_never_removed(tmp_path: Path) -> None:
    """The least recently used version goes beyond ``keep``, but not while a review holds it:
    its job may still be queued (the review then failed with no answer)."""
    log = tmp_path / "installs.log"
    pins = RuffPins(tmp_path / "ruffs", keep=1, installer=logging_installer(tmp_path, log))
    async with pins.lease(pin("0.4.1")) as held:
        assert held is not None
        async with pins.lease(pin("0.5.0")) as other:
            assert other is not None
        assert sorted(p.name for p in (tmp_path / "ruffs").iterdir()) == ["0.4.1", "0.5.0"]  # held
    async with pins.lease(pin("0.6.0")):
        pass
    assert [p.name for p in (tmp_path / "ruffs").iterdir()] == ["0.6.0"]


async def test_a_failed_install_is_not_tried_again_for_a_day(tmp_path: Path) -> None:
    attempts = tmp_path / "attempts.log"
    failing = [sys.executable, "-c", f"open({str(attempts)!r}, 'a').write('x'); raise SystemExit(1)"]
    now = [1000.0]
    pins = RuffPins(tmp_path / "ruffs", installer=failing, clock=lambda: now[0])
    for _ in range(3):
        async with pins.lease(pin("0.4.1")) as command:
            assert command is None
    assert attempts.read_text() == "x"  # one attempt, not one per review
    now[0] += 24 * 3600
    async with pins.lease(pin("0.4.1")) as command:
        assert command is None
    assert attempts.read_text() == "xx"  # a day later, tried again


async def test_one_install_runs_at_a_time(tmp_path: Path) -> None:
    """While one version installs (held at a gate), another waits for it to finish."""
    log, gate = tmp_path / "installs.log", tmp_path / "gate"
    gate.mkdir()
    os.mkfifo(gate / "entered")
    os.mkfifo(gate / "release")
    installer = logging_installer(tmp_path, log, held="0.4.1", gate=gate)
    pins = RuffPins(tmp_path / "ruffs", installer=installer)
    others = RuffPins(tmp_path / "ruffs", installer=installer)  # another reviewer of the process

    async def install(where: RuffPins, label: str) -> list[str] | None:
        async with where.lease(pin(label)) as command:
            return command

    first = asyncio.create_task(install(pins, "0.4.1"))
    await asyncio.to_thread((gate / "entered").read_text)  # 0.4.1's installer is running, held
    second = asyncio.create_task(install(others, "0.5.0"))
    # Until the second waits for the install slot (or, were there none, its installer starts).
    while others.installs_waiting == 0 and "0.5.0" not in log.read_text():  # noqa: ASYNC110
        await asyncio.sleep(0)  # a yield to the loop, not a wait for time
    assert log.read_text() == "start 0.4.1\n"
    await asyncio.to_thread((gate / "release").write_text, "go")
    assert await first is not None and await second is not None
    assert log.read_text() == "start 0.4.1\nend 0.4.1\nstart 0.5.0\nend 0.5.0\n"


def test_a_truncated_tree_does_not_hide_config_files() -> None:
    from app.review.core.lintconfig import config_paths
    from app.review.core.model import RepoTree

    complete = RepoTree.of(["a/b.py", "pyproject.toml"])
    assert config_paths(["a/b.py"], complete) == ["pyproject.toml"]
    cut_short = RepoTree.of(["a/b.py"], truncated=True)
    assert config_paths(["a/b.py"], cut_short) == [
        ".pre-commit-config.yaml",
        "setup.cfg",  # flake8's, at the root
        "tox.ini",
        ".flake8",
        ".ruff.toml",
        "ruff.toml",
        "pyproject.toml",
        "a/.ruff.toml",
        "a/ruff.toml",
        "a/pyproject.toml",
    ]


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_tree_github_cannot_list_means_no_layout_not_a_failed_review(tmp_path: Path) -> None:
    import aiohttp

    from app.github.calls import get_pull
    from app.github.client import GitHubClient
    from app.settings.config import default_graphql_url
    from app.settings.repoconfig import RepoConfig
    from app.usecases.pull import build_context
    from tests.harness import REPO, BotHarness
    from tests.test_review_cli import installation_token

    bot = BotHarness(tmp_path)
    number = bot.open_pull({"src/app.py": "x = 1\n"}, author="alice")
    await bot.fake.start(port=bot.fake_port)
    try:
        async with aiohttp.ClientSession() as session:
            token = await installation_token(bot, session)
            gh = GitHubClient(
                session,
                api_url=bot.fake.base_url,
                graphql_url=default_graphql_url(bot.fake.base_url),
                oauth_token=token,
            )
            pull = await get_pull(gh, repo=REPO, pr_number=number)
            context = await build_context(gh, repo=REPO, pull=pull, config=RepoConfig())
            assert context.tree is not None
            listed = await context.tree()
            assert listed is not None and "src/app.py" in listed.files
            bot.fake.world.repo(REPO).commits.pop(pull["head"]["sha"])  # GitHub answers 404 now
            assert await context.tree() is None
    finally:
        await bot.fake.stop()
