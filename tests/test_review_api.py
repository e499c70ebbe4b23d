"""The public-API check (``analyzers/api.py``): what counts as a break, table-driven on pairs of
module texts, then through the engine on a real git range (the base read by ``read_base``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from app.review.analyzers.api import (
    RULE,
    api_changes,
    api_findings,
    capped,
    defined_names,
    in_a_package,
    is_public_module,
    module_name,
)
from app.review.core.model import RepoTree, Severity
from app.review.engine.builtin import BuiltinReviewer
from app.review.measure.local import context_from_git

BASE = '''\
"""A module."""


def fetch(url, timeout=10, *, retries=3):
    return url


async def stream(url):
    return url


def _private(a, b):
    return a


class Client:
    def send(self, request, verify=True):
        return request

    def _helper(self, x):
        return x


class Old:
    pass


LIMIT = 5
'''

EXPORTS = '__all__ = ["Client"]\n'


def change(old: str, new: str, text: str = BASE) -> str:
    assert old in text
    return text.replace(old, new)


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        # breaks
        (
            change("def fetch(url, timeout=10, *, retries=3)", "def fetch(url, *, retries=3)"),
            {"fetch": ["parameter `timeout` removed"]},
        ),
        (
            change("def fetch(url, timeout=10,", "def fetch(url, deadline=10,"),
            {"fetch": ["parameter `timeout` renamed to `deadline`"]},
        ),
        (
            change("def fetch(url, timeout=10,", "def fetch(timeout=10, url=None,"),
            {
                "fetch": [
                    "parameter `url` moved (position: from 0 to 1 (+1))",
                    "parameter `timeout` moved (position: from 1 to 0 (-1))",
                ]
            },
        ),
        (change("retries=3", "retries=5"), {"fetch": ["default of `retries` changed from `3` to `5`"]}),
        (change("async def stream", "def stream"), {"stream": ["is no longer async"]}),
        (
            change("    def send(self", "    async def send(self"),
            {"Client.send": ["is now async: callers must await it"]},
        ),
        (change("class Old:\n    pass\n", ""), {"Old": ["was removed or renamed"]}),
        (
            change("    def send(self, request, verify=True):\n        return request\n", ""),
            {"Client.send": ["was removed or renamed"]},
        ),
        (
            change("def fetch(url, timeout=10, *, retries=3)", "def fetch(url, timeout=1, *, tries=3)"),
            {
                "fetch": [
                    "default of `timeout` changed from `10` to `1`",
                    "parameter `retries` renamed to `tries`",
                ]
            },
        ),
        (
            change(
                "def fetch(url, timeout=10, *, retries=3)", "def fetch(url, token, timeout=10, *, retries=3)"
            ),
            {
                "fetch": [
                    "parameter `timeout` moved (position: from 1 to 2 (+1))",
                    "new required parameter `token`: every call must pass it",
                ]
            },
        ),
        (
            change(
                "def fetch(url, timeout=10, *, retries=3)", "def fetch(url, timeout=10, *, retries=3, token)"
            ),
            {"fetch": ["new required parameter `token`: every call must pass it"]},
        ),
        (
            change(
                "    def send(self, request, verify=True)",
                "    def send(self, request, session, verify=True)",
            ),
            {
                "Client.send": [
                    "parameter `verify` moved (position: from 2 to 3 (+1))",
                    "new required parameter `session`: every call must pass it",
                ]
            },
        ),
        # not breaks
        (BASE, {}),
        (change("def _private(a, b)", "def _private(b)"), {}),  # private
        (change("    def _helper(self, x)", "    def _helper(self)"), {}),
        (change("LIMIT = 5", "LIMIT = 6"), {}),  # constants are not in scope
        (
            change(
                "def fetch(url, timeout=10, *, retries=3)",
                "def fetch(url, timeout=10, *, retries=3, log=None)",
            ),
            {},
        ),  # an optional parameter added
        (change("    return url\n\n\nasync", "    return url.strip()\n\n\nasync"), {}),  # the body only
        (EXPORTS + change("class Old:\n    pass\n", ""), {}),  # Old was never exported
        (EXPORTS + change("class Client:", "class Customer:"), {"Client": ["was removed or renamed"]}),
        ("def broken(:\n", {}),
        # re-exports: their targets are in other modules, not followed (and no crash)
        (
            'from .x import A\n__all__ = ["A"]\n',
            {},
        ),  # a syntax error: nothing to compare (the syntax check reports it)
    ],
)
def test_api_changes(head: str, expected: dict[str, list[str]]) -> None:
    base = EXPORTS + BASE if head.startswith(EXPORTS) else BASE
    if head.startswith("from .x"):
        base = 'from .x import A, B\n__all__ = ["A", "B"]\n\n\ndef keep(a=1):\n    return a\n'

    assert {c.name: c.changes for c in api_changes("pkg/mod.py", base, head)} == expected


def test_a_parameter_python_binds_is_no_new_required_parameter() -> None:
    static = "class Shape:\n    @staticmethod\n    def parse(text):\n        return text\n"
    classmethod_ = "class Shape:\n    @classmethod\n    def parse(cls, text):\n        return text\n"
    changes = {c.name: c.changes for c in api_changes("pkg/shapes.py", static, classmethod_)}
    assert not [line for lines in changes.values() for line in lines if "required" in line]
    now_static = "class Shape:\n    @staticmethod\n    def parse(cls, text):\n        return text\n"
    plain = "class Shape:\n    def parse(self):\n        return 1\n"
    assert {c.name: c.changes for c in api_changes("pkg/shapes.py", plain, now_static)}["Shape.parse"] == [
        "parameter `self` renamed to `cls`",
        "new required parameter `text`: every call must pass it",
    ]


@pytest.mark.parametrize(
    ("base", "head", "expected"),
    [
        (
            "def decode(token, key='', **kwargs):\n    pass\n",
            "def decode(token, key='', audience=None):\n    pass\n",
            ["parameter `**kwargs` removed"],
        ),  # not "renamed to `audience`"
        ("def f(*args):\n    pass\n", "def f(first=None):\n    pass\n", ["parameter `*args` removed"]),
        ("def f(a, b):\n    pass\n", "def f(a, c):\n    pass\n", ["parameter `b` renamed to `c`"]),
    ],
)
def test_variadic_parameters(base: str, head: str, expected: list[str]) -> None:
    [found] = api_changes("pkg/mod.py", base, head)
    assert found.changes == expected


def test_findings_are_grouped_per_object_and_anchored_on_an_added_line() -> None:
    head = change("def fetch(url, timeout=10, *, retries=3):", "def fetch(url, *, retries=4):")
    head = change("class Old:\n    pass\n", "", head)
    findings = [f for _, f in api_findings("src/pkg/mod.py", BASE, head, added={4})]
    assert [(f.line, f.inline, f.severity, f.rule) for f in findings] == [
        (4, True, Severity.CONCERN, RULE),
        (1, False, Severity.CONCERN, RULE),  # gone: told in the review body
    ]
    assert findings[0].message == (
        "Public API of `pkg.mod`: `fetch()` parameter `timeout` removed; default of `retries` changed "
        "from `3` to `4`. Do its callers (in this repository and outside) and the changelog know?"
    )
    assert "class `Old` was removed or renamed" in findings[1].message
    # no added line inside the object: the body, not a line the PR did not change
    assert [f.inline for _, f in api_findings("src/pkg/mod.py", BASE, head, added={40})] == [False, False]
    # Old defined in another file of the pull request: moved, not removed
    moved = api_findings("src/pkg/mod.py", BASE, head, added={4}, defined_elsewhere={"Old"})
    assert [name for name, _ in moved] == ["pkg.mod.fetch"]


def test_a_refactor_of_many_objects_gets_five_findings_and_one_sentence() -> None:
    base = "".join(f"def f{n}(a, b=1):\n    return a\n\n\n" for n in range(8))
    head = base.replace("b=1", "b=2")
    findings = capped(api_findings("pkg/mod.py", base, head, added=set(range(1, 40))))
    assert len(findings) == 6
    assert [f.inline for f in findings] == [True] * 5 + [False]
    assert findings[-1].message == (
        "3 more public API changes (`pkg.mod.f5`, `pkg.mod.f6`, `pkg.mod.f7`). "
        "Do their callers and the changelog know?"
    )
    assert (
        len(capped(api_findings("pkg/mod.py", base, head.replace("f7(a, b=2)", "f7(a, b=1)"), set()), 7)) == 7
    )


def test_defined_names() -> None:
    text = "class A:\n    async def run(self):\n        def inner():\n            pass\nx = 'def not_this'\n"
    assert defined_names(text) == {"A", "run", "inner"}


@pytest.mark.parametrize(
    ("path", "public", "name"),
    [
        ("pkg/mod.py", True, "pkg.mod"),
        ("src/pkg/__init__.py", True, "pkg"),
        ("pkg/_internal/mod.py", False, "pkg._internal.mod"),
        ("pkg/_mod.py", False, "pkg._mod"),
        ("tests/test_mod.py", False, "tests.test_mod"),
        ("pkg/conftest.py", False, "pkg.conftest"),
        ("pkg/mod.pyi", True, "pkg.mod"),
        ("README.md", False, "README"),
    ],
)
def test_public_modules(path: str, public: bool, name: str) -> None:
    assert is_public_module(path) is public
    assert module_name(path) == name


PACKAGED = RepoTree.of(
    [
        *("pkg/__init__.py", "pkg/mod.py", "pkg/sub/__init__.py", "pkg/sub/deep.py"),
        *("src/lib/__init__.pyi", "src/lib/api.py", "src/alone.py", "top.py"),
        *("bench/compare.py", "pkg/loose/script.py"),
    ]
)


@pytest.mark.parametrize(
    ("path", "tree", "packaged"),
    [
        ("pkg/mod.py", PACKAGED, True),
        ("pkg/sub/deep.py", PACKAGED, True),
        ("src/lib/api.py", PACKAGED, True),  # src layout; a stub-only __init__ counts
        ("top.py", PACKAGED, True),  # a top-level module is importable as it is
        ("src/alone.py", PACKAGED, True),
        ("bench/compare.py", PACKAGED, False),  # a directory of scripts
        ("pkg/loose/script.py", PACKAGED, False),  # a directory inside a package without __init__
        ("bench/compare.py", None, True),  # no listing: assumed packaged
        ("bench/compare.py", RepoTree.of(["bench/compare.py"], truncated=True), True),
    ],
)
def test_only_modules_inside_a_package_are_api(path: str, tree: RepoTree | None, packaged: bool) -> None:
    assert in_a_package(path, tree) is packaged


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


async def test_the_engine_compares_with_the_base(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "tests").mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Dev")
    (repo / "bench").mkdir()
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "mod.py").write_text(BASE)
    (repo / "bench" / "run.py").write_text(BASE)
    (repo / "tests" / "test_mod.py").write_text("def test_x(a=1):\n    pass\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / "pkg" / "mod.py").write_text(change("retries=3", "retries=5"))
    (repo / "bench" / "run.py").write_text(change("retries=3", "retries=5"))  # a script: not API
    (repo / "tests" / "test_mod.py").write_text("def test_x(a=2):\n    pass\n")  # tests: not API
    git(repo, "commit", "-qam", "change")
    result = await BuiltinReviewer().review(await context_from_git(repo, "HEAD~1", "HEAD"))
    assert [(f.path, f.line, f.rule, f.severity) for f in result.findings] == [
        ("pkg/mod.py", 4, RULE, Severity.CONCERN)
    ]
    assert result.verdict.value == "COMMENT"
    assert "; public API compared with the base in 1 module;" in result.summary
