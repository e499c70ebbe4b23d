"""What the model is shown beside a changed function (``llm/related.py``): the definitions the
changed lines call and the call sites of changed public functions, table-driven; then a
cross-file defect (a wrong keyword to a function defined in a file the pull request does not
touch) reaching the fake model and found by it, through a real local git range."""

from __future__ import annotations

import re
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.review.llm import build_reviewer
from app.review.llm.related import Sources, imported_modules, related_context, wanted_paths
from app.review.local import context_from_git
from tests.fake_llm import Asked, FakeModelServer, Reply, answer, proposed
from tests.test_llm_engine import settings

NET = '''\
"""Networking."""


def send(url, *, timeout=10, retries=3):
    """Send a request to url.

    Raises TimeoutError after timeout seconds.
    """
    return url


class Session:
    def __init__(self, base, *, verify=True):
        self.base = base

    def get(self, path):
        """GET a path below the base."""
        return path
'''

APP = """\
from pkg.net import Session, send
from . import net


def fetch(url):
    return send(url, timeout_s=5)


def other(url):
    session = Session(url)
    return net.send(url)
"""

CALLER = """\
from pkg.app import fetch


def main():
    return fetch("x")
"""

FILES = frozenset({"pkg/__init__.py", "pkg/net.py", "pkg/app.py", "pkg/cli.py", "README.md"})


def test_imported_modules() -> None:
    assert imported_modules(
        "pkg/sub/app.py", "import os.path\nimport a.b as c\nfrom .. import net\nfrom .x import y as z\n"
    ) == {
        "os": ("os", None),
        "c": ("a.b", None),
        "net": ("pkg", "net"),
        "z": ("pkg.sub.x", "y"),
    }


def test_the_files_to_read_are_imported_modules_then_siblings() -> None:
    assert wanted_paths({"pkg/app.py": APP}, FILES) == ["pkg/net.py", "pkg/__init__.py", "pkg/cli.py"]


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        # line 6 calls send: its signature and docstring; fetch changed: its call site in cli.py
        (
            {6},
            [
                "- pkg/net.py:4 (called on line 6): def send(url, *, timeout=10, retries=3)",
                "    Send a request to url.",
                "",
                "    Raises TimeoutError after timeout seconds.",
                '- pkg/cli.py:5 calls fetch: return fetch("x")',
            ],
        ),
        # line 10 builds a Session (its __init__), line 11 calls net.send
        (
            {10, 11},
            [
                "- pkg/net.py:12 (called on line 10): class Session: __init__(self, base, *, verify=True)",
                "- pkg/net.py:4 (called on line 11): def send(url, *, timeout=10, retries=3)",
                "    Send a request to url.",
                "",
                "    Raises TimeoutError after timeout seconds.",
            ],
        ),
        ({1}, []),  # an import line calls nothing
    ],
)
def test_related_context(changed: set[int], expected: list[str]) -> None:
    sources = Sources({"pkg/app.py": APP, "pkg/net.py": NET, "pkg/cli.py": CALLER})
    found = related_context("pkg/app.py", APP, changed, sources, FILES, budget_chars=10_000)
    assert list(found.lines) == expected
    assert found.cut == 0


def test_the_budget_cuts_the_lowest_ranked_and_counts_them() -> None:
    sources = Sources({"pkg/app.py": APP, "pkg/net.py": NET, "pkg/cli.py": CALLER})
    found = related_context("pkg/app.py", APP, {6}, sources, FILES, budget_chars=160)  # 150 + 46 needed
    assert found.lines[0].startswith("- pkg/net.py:4")
    assert not any("cli.py" in line for line in found.lines)
    assert found.cut == 1
    assert ("pkg/net.py", 4) in found.shown


def spot_the_wrong_keyword(asked: Asked) -> Reply:
    """A model that flags a call with a keyword the called function's signature (shown to it)
    does not take."""
    signatures = dict(re.findall(r"def (\w+)\(([^)]*)\)", asked.user))
    findings = []
    for path, lines in asked.files().items():
        for number, text in lines:
            call = re.search(r"(\w+)\(\w+, (\w+)=", text)
            if call and call.group(1) in signatures and f"{call.group(2)}=" not in signatures[call.group(1)]:
                findings.append(
                    proposed(path, number, message=f"`{call.group(1)}` takes no `{call.group(2)}`")
                )
    return answer(asked, findings)


@pytest.fixture
async def model() -> AsyncIterator[FakeModelServer]:
    server = await FakeModelServer(spot_the_wrong_keyword).start()
    yield server
    await server.stop()


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


async def test_a_wrong_keyword_to_a_function_in_another_file_is_visible(
    model: FakeModelServer, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Dev")
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "net.py").write_text(NET)
    (repo / "pkg" / "app.py").write_text(APP.replace("timeout_s=5", "timeout=5"))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / "pkg" / "app.py").write_text(APP)
    git(repo, "commit", "-qam", "wrong keyword")
    reviewer = build_reviewer(settings(model))
    try:
        result = await reviewer.review(await context_from_git(repo, "HEAD~1", "HEAD"))
    finally:
        await reviewer.aclose()
    [asked] = model.reviews()
    assert "- pkg/net.py:4 (called on line 6): def send(url, *, timeout=10, retries=3)" in asked.user
    # What eval --history reads as "in the prompt": the hunk, the enclosing function, the callee.
    assert {("pkg/app.py", 6), ("pkg/app.py", 5), ("pkg/net.py", 4)} <= result.prompt_lines
    assert ("pkg/net.py", 9) not in result.prompt_lines  # send's body was not shown
    assert [(f.path, f.line, f.message) for f in result.findings if f.rule.startswith("llm/")] == [
        ("pkg/app.py", 6, "`send` takes no `timeout_s` (confidence 80%)")
    ]
