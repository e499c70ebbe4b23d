"""Say less, and right (Python): each case from what a maintainer called wrong or noise on real
pull requests. Re-exports are not unused; no suggestion deletes an alias; an Action's prints are
its output; a 0.x package's API changes are nits; API changes are not housekeeping."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from app.review.analyzers.api import RULE as API_RULE
from app.review.analyzers.api import package_major, version_paths
from app.review.analyzers.bindings import binds_alias, exported_imports
from app.review.analyzers.debug import is_action_script, is_print_exempt, standing_actions
from app.review.core.model import ChangedFile, FileContent, Finding, RepoTree, ReviewResult, Severity, Verdict
from app.review.engine.builtin import BuiltinReviewer
from app.review.llm.checks import check_findings
from app.review.llm.schema import ModelFinding
from app.review.measure.local import context_from_git
from app.review.output import render
from app.review.rounds.markers import Trigger
from tests.test_review_analyzers import changed
from tests.test_review_api import BASE as API_BASE
from tests.test_review_api import change
from tests.test_review_engine import RecordingReader, pull

# --- re-exports ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "head", "unused"),
    [
        # httpx's and starlette's ``__init__.py``: every import is the package's interface.
        ("httpx/__init__.py", "from ._client import Client\nfrom ._models import Request as Request\n", []),
        ("pkg/__init__.pyi", "from .a import B\n", []),
        # Listed in ``__all__``: used, however the module lists it (ruff misses ``.extend``).
        ("pkg/api.py", 'from .core import run\n__all__ = ["run"]\n', []),
        ("pkg/api.py", 'from .core import run, stop\n__all__ = ["run"]\n__all__.extend(["stop"])\n', []),
        ("pkg/api.py", 'from .core import run\n__all__: list[str] = []\n__all__.append("run")\n', []),
        (
            "pkg/api.py",
            'try:\n    from .fast import run\nexcept ImportError:\n    run = None\n__all__ = ("run",)\n',
            [],
        ),
        ("pkg/api.py", 'import os.path as osp\n__all__ = ["x"] + ["osp"]\n', []),
        # ``__all__`` lists other names: this one is still unused.
        ("pkg/api.py", 'from .core import run, stop\n__all__ = ["run"]\n', ["python/F401"]),
        # Anywhere else an unused import is still said.
        ("pkg/mod.py", "from .core import run\n", ["python/F401"]),
    ],
)
async def test_re_exports_are_not_unused(path: str, head: str, unused: list[str]) -> None:
    file = changed(path, None, head)
    result = await BuiltinReviewer().review(pull([file], RecordingReader({path: head})))
    assert [f.rule for f in result.findings if f.rule == "python/F401"] == unused


# --- no suggestion deletes an alias -------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "alias"),
    [
        ("from .new_module import thing as old_name", True),
        ("import numpy as np", True),
        ("from . import a, b as c  # compat", True),
        ("OldName = NewName", True),
        ("old_api = module.new_api", True),
        ("import os", False),
        ("from x import y", False),
        ("    import os as o", False),  # inside a function: not the module's
        ("x = compute()", False),
        ("LIMIT = 5", False),
        ("handler = None", False),  # a constant, not an alias
        ("DEBUG = False  # off", False),
        ("NoneType = NoneType_", True),
    ],
)
def test_binds_alias(line: str, alias: bool) -> None:
    assert binds_alias(line) is alias


@pytest.mark.parametrize(
    ("text", "places"),
    [
        ('from .a import x, y\n__all__ = ["y"]\n', {(1, 19)}),
        ('from .a import (\n    x as old_x,\n)\n__all__ = ["old_x"]\n', {(2, 5)}),
        ('import a.b\n__all__ = ["a"]\n', {(1, 8)}),
        ('s = "é"; import x\n__all__ = ["x"]\n', {(1, 17)}),  # ruff counts characters, not bytes
        ('__all__ = ["x"]\ndef f():\n    import x\n', set()),  # a function's import is not the module's
        ("__all__ = names()\nimport x\n", set()),  # what ``__all__`` holds is not known
        ("from .a import x\n", set()),
        ("import x\n__all__ = " + '["y"] + ' * 2000 + '["x"]\n', {(1, 8)}),  # deep, not recursed into
        ("from .a import (\n", set()),  # does not parse: the syntax check says so
    ],
)
def test_exported_imports(text: str, places: set[tuple[int, int]]) -> None:
    assert exported_imports(text) == places


async def test_an_unused_alias_keeps_its_finding_but_gets_no_suggestion() -> None:
    head = "from .new_module import thing as old_name\nimport os\n\nx = 1\n"
    file = changed("pkg/compat.py", "x = 1\n", head)
    result = await BuiltinReviewer().review(pull([file], RecordingReader({file.path: head})))
    by_line = {f.line: f for f in result.findings if f.rule == "python/F401"}
    assert set(by_line) == {1, 2}
    assert by_line[1].suggestion is None  # the back-compat alias: never a one-click deletion
    assert by_line[2].suggestion == ""  # a plain unused import may be deleted in one click


ALIASES = "import json\nfrom .new import thing as old_name\nOld = New\nx = old_name(Old)\n"


@pytest.mark.parametrize(
    ("path", "line", "end_line", "suggestion", "kept"),
    [
        ("pkg/compat.py", 2, None, "", False),  # deletes the alias
        ("pkg/compat.py", 2, None, "from .new import thing", False),  # rewrites it
        ("pkg/compat.py", 3, None, "Old = Newer", False),
        ("pkg/compat.py", 2, 3, "from .new import thing as old_name\nOld = Newer", False),
        ("pkg/compat.py", 1, 2, "import json\n\nfrom .new import thing as old_name", True),  # kept as it was
        ("pkg/compat.py", 4, None, "x = old_name(Old) or None", True),  # no alias on the line
        ("pkg/compat.py", 1, None, "", True),  # a plain import
        ("docs/compat.md", 2, None, "", True),  # not Python
    ],
)
def test_a_model_suggestion_never_deletes_an_alias(
    path: str, line: int, end_line: int | None, suggestion: str, kept: bool
) -> None:
    file = changed(path, None, ALIASES)
    proposed = ModelFinding(
        path=path,
        line=line,
        end_line=end_line,
        severity="nit",
        category="maintainability",
        confidence=0.9,
        message="Unused here.",
        suggestion=suggestion,
    )
    [(_, found)] = check_findings([proposed], files=[file], builtin=[], line_counts={}, blockers=False)[0]
    assert (found.suggestion == suggestion) is kept
    assert (found.suggestion is None) is not kept


# --- an Action's prints -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "tree", "created", "action"),
    [
        ("src/main.py", RepoTree.of(["action.yml", "src/main.py"]), {}, True),
        ("act/src/main.py", RepoTree.of(["act/action.yaml", "act/src/main.py"]), {}, True),
        ("lib/main.py", RepoTree.of(["other/action.yml", "lib/main.py"]), {}, False),
        ("lib/main.py", None, {}, False),
        # The hostile fork: an action.yml it adds (or renames into place) silences nothing.
        ("src/main.py", RepoTree.of(["action.yml", "src/main.py"]), {"action.yml": "added"}, False),
        ("src/main.py", RepoTree.of(["action.yml", "src/main.py"]), {"action.yml": "renamed"}, False),
        ("src/main.py", RepoTree.of(["action.yml", "src/main.py"]), {"action.yml": "modified"}, True),
    ],
)
def test_is_action_script(path: str, tree: RepoTree | None, created: dict[str, str], action: bool) -> None:
    changed = [ChangedFile(p, status, None) for p, status in created.items()]
    assert is_action_script(path, standing_actions(tree, changed)) is action


async def test_a_pull_request_that_adds_an_action_yml_silences_no_print() -> None:
    head = "def handler(value):\n    print(value)\n    return value\n"
    files = [
        changed("src/lib.py", "def handler(value):\n    return value\n", head),
        changed("action.yml", None, "name: x\n"),
    ]
    reader = RecordingReader({"src/lib.py": head, "action.yml": "name: x\n"})
    result = await BuiltinReviewer().review(pull(files, reader))
    assert [f.line for f in result.findings if f.rule == "debug/print"] == [2]


@pytest.mark.parametrize(
    ("path", "exempt"),
    [(".github/scripts/release.py", True), (".github/actions/x/main.py", True), ("src/github/x.py", False)],
)
def test_prints_under_github_are_exempt(path: str, exempt: bool) -> None:
    assert is_print_exempt(path) is exempt


async def test_a_print_of_a_workflow_command_is_not_a_finding() -> None:
    head = (
        'import os\n\n\ndef main():\n    print(f"::notice::{os.getcwd()}")\n'
        '    print("debugging", os.getcwd())  # ::set-output in a comment exempts nothing\n'
    )
    file = changed("src/entry.py", "import os\n", head)
    result = await BuiltinReviewer().review(pull([file], RecordingReader({file.path: head})))
    assert [f.line for f in result.findings if f.rule == "debug/print"] == [6]


# --- a 0.x package's API ------------------------------------------------------------------------


def text(value: str) -> FileContent:
    return FileContent(value, len(value))


@pytest.mark.parametrize(
    ("configs", "modules", "major"),
    [
        ({"pyproject.toml": '[project]\nname = "x"\nversion = "0.27.0"\n'}, [], 0),
        ({"pyproject.toml": '[project]\nversion = "2.1"\n'}, ['__version__ = "0.1"\n'], 2),
        ({"pyproject.toml": '[tool.poetry]\nversion = "0.9.1"\n'}, [], 0),
        ({"pyproject.toml": '[project]\ndynamic = ["version"]\n'}, ['__version__ = "0.38.2"\n'], 0),
        ({"setup.cfg": "[metadata]\nname = x\nversion = 1.26.0\n"}, [], 1),
        ({}, ['__version__: str = "3.0.0"\n'], 3),
        ({}, ["__version__ = get_version()\n"], None),
        ({"pyproject.toml": "[project\n"}, [], None),
    ],
)
def test_package_major(configs: dict[str, str], modules: list[str], major: int | None) -> None:
    assert package_major({p: text(t) for p, t in configs.items()}, modules) == major


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


PYPROJECT = '[project]\nname = "pkg"\nversion = "{}"\n'
DYNAMIC = '[project]\nname = "pkg"\ndynamic = ["version"]\n'


@pytest.mark.parametrize(
    ("base", "head", "severity"),
    [
        ({"pyproject.toml": PYPROJECT.format("0.27.0")}, {}, Severity.NIT),
        ({"pyproject.toml": PYPROJECT.format("1.0.0")}, {}, Severity.CONCERN),
        # The version at the base: a bump to 1.0 in the same pull request leaves it at 0.x.
        (
            {"pyproject.toml": DYNAMIC, "pkg/__init__.py": '__version__ = "0.9.0"\n'},
            {"pkg/__init__.py": '__version__ = "1.0.0"\n'},
            Severity.NIT,
        ),
        (
            {"pyproject.toml": PYPROJECT.format("0.9.0")},
            {"pyproject.toml": PYPROJECT.format("1.0.0")},
            Severity.NIT,
        ),
        # A version module the pull request adds says nothing of the base.
        ({"pyproject.toml": DYNAMIC}, {"pkg/__version__.py": '__version__ = "0.1.0"\n'}, Severity.CONCERN),
    ],
)
async def test_a_0x_packages_api_changes_are_nits(
    tmp_path: Path, base: dict[str, str], head: dict[str, str], severity: Severity
) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Dev")
    for path, content in {"pkg/__init__.py": "", "pkg/mod.py": API_BASE, **base}.items():
        (repo / path).write_text(content)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    for path, content in {"pkg/mod.py": change("retries=3", "retries=5", API_BASE), **head}.items():
        (repo / path).write_text(content)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "change")
    result = await BuiltinReviewer().review(await context_from_git(repo, "HEAD~1", "HEAD"))
    assert [(f.rule, f.severity) for f in result.findings if f.rule == API_RULE] == [(API_RULE, severity)]


# --- API changes are not housekeeping -----------------------------------------------------------


def test_api_changes_have_their_own_heading() -> None:
    api = Finding(
        "pkg/mod.py", 1, Severity.CONCERN, API_RULE, "3 more public API changes.", "a", inline=False
    )
    whitespace = Finding("a.txt", 1, Severity.NIT, "hygiene/large-file", "A large file.", "b", inline=False)
    plan = render.plan_review(
        ReviewResult(Verdict.COMMENT, "s", findings=(api, whitespace)),
        head_sha="a" * 40,
        commentable={},
        policy=render.Policy(approve=True, pr_by_bot=False),
        trigger=Trigger.MENTION,
        bot_name="revbot",
    )
    api_at, housekeeping_at = plan.body.index("**Public API changes**"), plan.body.index("**Housekeeping**")
    assert api_at < plan.body.index("3 more public API changes") < housekeeping_at
    assert plan.body.index("A large file.") > housekeeping_at


def test_version_paths() -> None:
    assert version_paths(["httpx/_client.py", "httpx/_transports/default.py", "src/urllib3/response.py"]) == [
        "httpx/__init__.py",
        "httpx/__version__.py",
        "httpx/_version.py",
        "httpx/version.py",
        "src/urllib3/__init__.py",
        "src/urllib3/__version__.py",
        "src/urllib3/_version.py",
        "src/urllib3/version.py",
        "setup.py",
    ]


@pytest.mark.parametrize(
    ("module", "major"),
    [
        ('__title__ = "httpx"\n__version__ = "0.7.2"\n', 0),  # httpx/__version__.py in 2019
        ('setup(\n    name="httpx",\n    version="0.7.2",\n)\n', 0),  # a setup.py
        ('setup(name="x", version=get_version())\n', None),
    ],
)
def test_the_version_a_module_or_setup_py_declares(module: str, major: int | None) -> None:
    assert package_major({}, [module]) == major


@pytest.mark.parametrize(
    ("head_default", "changed"),
    [
        ("_READ_CHUNK_SIZE", False),  # urllib3 #5019: ``2 ** 16`` named, the same value
        ("2**16", False),  # spacing
        ("_OTHER_SIZE", True),
        ("2 ** 17", True),
    ],
)
def test_a_default_written_another_way_is_the_same_default(head_default: str, changed: bool) -> None:
    from app.review.analyzers.api import api_changes

    base = "def stream(amt=2 ** 16, decode_content=None):\n    pass\n"
    head = (
        "_READ_CHUNK_SIZE = 2**16\n_OTHER_SIZE = 2**17\n\n\n"
        f"def stream(amt={head_default}, decode_content=None):\n    pass\n"
    )
    assert bool(api_changes("pkg/response.py", base, head)) is changed


@pytest.mark.parametrize(
    ("base_param", "head_param", "changed"),
    [
        ("__name: str", "name: str, /", False),  # starlette #2178, "Drop support for Python 3.7"
        ("__name: str", "name: str", False),
        ("name: str", "label: str", True),  # a keyword someone may pass
        ("__init__: str", "init: str", True),  # a dunder name is no such convention
    ],
)
def test_a_positional_only_by_convention_parameter_renamed(
    base_param: str, head_param: str, changed: bool
) -> None:
    from app.review.analyzers.api import api_changes

    base = f"class Router:\n    def url_path_for(self, {base_param}, **params):\n        pass\n"
    head = f"class Router:\n    def url_path_for(self, {head_param}, **params):\n        pass\n"
    assert bool(api_changes("pkg/routing.py", base, head)) is changed
