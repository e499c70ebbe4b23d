"""The likely-bug checks (ruff T10, PLE, B006, B015, B018 on top of the repository's rules):
table-driven through the analyzer with the real ruff, then through the engine."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from app.review.analyzers import AnalysisInput, FileUnderReview
from app.review.analyzers.likely_bugs import LikelyBugAnalyzer, likely_bug_findings
from app.review.core.diff import parse_patch
from app.review.core.model import ChangedFile, FileContent, Severity
from app.review.engine.builtin import BuiltinReviewer
from app.review.measure.local import context_from_git


def added_file(path: str, text: str) -> FileUnderReview:
    lines = text.splitlines()
    patch = f"@@ -0,0 +1,{len(lines)} @@\n" + "\n".join(f"+{line}" for line in lines)
    return FileUnderReview(
        ChangedFile(path, "added", patch, additions=len(lines)),
        parse_patch(patch),
        FileContent(text=text, size=len(text)),
    )


@pytest.mark.parametrize(
    ("path", "text", "expected"),
    [
        # found
        ("pkg/m.py", "def f(items=[]):\n    return items\n", [(1, "python/B006")]),
        ("pkg/m.py", "def f(x):\n    x == 1\n    return x\n", [(2, "python/B015")]),
        ("pkg/m.py", "def f(x):\n    x.attribute\n    return x\n", [(2, "python/B018")]),
        (
            "pkg/m.py",
            "import pudb\n\n\ndef f():\n    pudb.set_trace()\n",
            [(1, "python/T100"), (5, "python/T100")],
        ),
        ("pkg/m.py", "class A:\n    def __init__(self):\n        return 1\n", [(3, "python/PLE0101")]),
        ("pkg/m.py", "def f(x):\n    await x\n", [(2, "python/PLE1142")]),
        (
            "tests/test_m.py",
            "def test(items=[]):\n    assert items\n",
            [(1, "python/B006")],
        ),  # not exempt in tests
        # not found
        ("pkg/m.py", "def f(items=None):\n    return items or []\n", []),
        ("pkg/m.py", "def f(x):\n    assert x == 1\n    return x == 2\n", []),
        ("pkg/m.py", "def f(items=[]):  # noqa: B006\n    return items\n", []),
        ("pkg/m.py", "import pdb\n\n\ndef f():\n    pdb.set_trace()\n", []),  # the debug analyzer's
        ("pkg/m.py", "def f():\n    breakpoint()\n", []),
        ("tests/test_m.py", "def test(x):\n    x.attribute\n    x == 1\n", []),  # the point of a test
        ("pkg/m.py", "def f(x):\n    return lambda: x\n", []),  # B023, ARG: left out
        ("pkg/m.py", "def f(x, unused):\n    return x\n", []),
    ],
)
async def test_likely_bugs(path: str, text: str, expected: list[tuple[int, str]]) -> None:
    output = await LikelyBugAnalyzer().analyse(AnalysisInput((added_file(path, text),), (), {}))
    assert [(f.line, f.rule) for f in output.findings] == expected
    assert all(f.severity is Severity.CONCERN for f in output.findings)
    assert output.notes == ["likely-bug checks (T10, PLE, B006, B015, B018) run"]


def test_diagnostics_are_read_defensively() -> None:
    rows = {"a.py": ("x = 1",)}
    diagnostics: list[dict[str, Any]] = [
        {"filename": "a.py", "code": "B018", "location": {"row": 1}, "message": "Found useless expression"},
        {"filename": "other.py", "code": "B018", "location": {"row": 1}},  # not a reviewed file
        {"filename": "a.py", "code": None, "location": {"row": 1}},  # a syntax error: the Python check's
        {"filename": "a.py", "code": "invalid-syntax", "location": {"row": 1}},
        {"filename": "a.py", "code": "B006", "location": None},
    ]
    assert [(f.path, f.line, f.message) for f in likely_bug_findings(diagnostics, rows)] == [
        ("a.py", 1, "Found useless expression (B018)")
    ]


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


async def test_through_the_engine_on_changed_lines_only_and_one_finding_per_rule(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Dev")
    # The repository selects B006 itself: still one finding (a concern), not two.
    (repo / "ruff.toml").write_text('[lint]\nselect = ["E9", "F", "B006"]\n')
    (repo / "pkg" / "m.py").write_text("def old(items=[]):\n    return items\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / "pkg" / "m.py").write_text(
        "def old(items=[]):\n    return items\n\n\ndef new(seen={}):\n    return seen\n"
    )
    git(repo, "commit", "-qam", "change")
    result = await BuiltinReviewer().review(await context_from_git(repo, "HEAD~1", "HEAD"))
    assert [(f.line, f.rule, f.severity) for f in result.findings] == [(5, "python/B006", Severity.CONCERN)]
    assert "likely-bug checks (T10, PLE, B006, B015, B018) run" in result.summary
