"""Sizes a reader can hold (issue 28): no function of ``app`` over 80 lines, no module over 500
outside the fake GitHub (``app/sandbox``), unless the module is a table and its first line says
so. Read from the source, so a function that grows past the limit fails here, not in a review."""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 500
FAKE_GITHUB = "sandbox"


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > limit:
                found.append(f"{node.name} ({length} lines)")
    return found


def too_long(path: Path, text: str, limit: int = MAX_MODULE_LINES) -> bool:
    lines = text.splitlines()
    is_table = bool(lines) and "table" in lines[0].casefold()
    return len(lines) > limit and not is_table and path.relative_to(APP).parts[0] != FAKE_GITHUB


def test_no_function_is_over_80_lines() -> None:
    found = {
        str(path.relative_to(APP)): hits
        for path in sorted(APP.rglob("*.py"))
        if (hits := long_functions(path.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_no_module_is_over_500_lines_outside_the_fake_github() -> None:
    found = [
        str(path.relative_to(APP))
        for path in sorted(APP.rglob("*.py"))
        if too_long(path, path.read_text("utf-8"))
    ]
    assert found == []


def test_the_size_checks_see_what_they_forbid() -> None:
    body = "".join(f"    x{n} = {n}\n" for n in range(80))
    assert long_functions(f"def f():\n{body}") == ["f (81 lines)"]
    assert long_functions(f"async def g():\n{body[: -len('    x79 = 79') - 1]}") == []
    module = '"""Some module."""\n' + "x = 1\n" * 500
    assert too_long(APP / "review" / "x.py", module)
    assert not too_long(APP / "review" / "x.py", '"""A table of patterns."""\n' + "x = 1\n" * 500)
    assert not too_long(APP / "sandbox" / "x.py", module)
