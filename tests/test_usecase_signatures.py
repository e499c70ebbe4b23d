"""A use case takes the bot only when it uses it: a ``bot`` parameter that the body never reads
hides what the function depends on (and makes every caller build a whole bot)."""

from __future__ import annotations

import ast
from pathlib import Path

USECASES = Path(__file__).resolve().parent.parent / "app" / "usecases"


def unused_bot_parameters(source: str) -> list[str]:
    """The functions of ``source`` with a ``bot`` parameter their body never names (pure)."""
    unused = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            params = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
            named = {n.id for statement in node.body for n in ast.walk(statement) if isinstance(n, ast.Name)}
            if "bot" in params and "bot" not in named:
                unused.append(node.name)
    return unused


def test_the_check_finds_an_unused_bot() -> None:
    source = (
        "async def uses(gh, bot): return bot.settings\nasync def ignores(gh, bot, *, repo): return repo\n"
    )
    assert unused_bot_parameters(source) == ["ignores"]


def test_no_use_case_takes_a_bot_it_never_uses() -> None:
    found = {
        str(path.relative_to(USECASES)): unused_bot_parameters(path.read_text(encoding="utf-8"))
        for path in USECASES.rglob("*.py")
    }
    assert {name: functions for name, functions in found.items() if functions} == {}
