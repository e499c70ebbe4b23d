"""The review engine is a seam chosen once: callers use ``model.Reviewer``'s methods, never a
probe of which engine they hold (issue 19). Read from the source, so a probe added anywhere fails."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from app.review.core.model import ModelInputs, PullContext, Reviewer, ReviewResult, ThreadQuestion
from app.review.engine.builtin import BuiltinReviewer
from app.review.llm import build_reviewer
from app.settings.config import load_llm_settings

APP = Path(__file__).resolve().parent.parent / "app"
PROBES = {"isinstance", "getattr", "hasattr"}
ENGINES = {"BuiltinReviewer", "LlmReviewer"}
# Where an engine may be named: the modules that choose one (the runtime, the command line, the
# model reviewer's own package) and the built-in engine's module.
CHOOSERS = {"runtime.py", "cli/reviewing.py", "review/engine/builtin.py", "review/llm"}


@functools.cache
def modules() -> list[tuple[str, ast.Module]]:
    """Every module of ``app``, parsed once for the module's tests (under a second: fast loop)."""
    return [
        (path.relative_to(APP).as_posix(), ast.parse(path.read_text(), str(path)))
        for path in sorted(APP.rglob("*.py"))
    ]


def probes(tree: ast.Module) -> list[str]:
    """Calls such as ``isinstance(bot.reviewer, LlmReviewer)`` or ``getattr(reviewer, "aclose")``:
    a probe whose subject or class names a reviewer or an engine."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PROBES):
            continue
        text = " ".join(ast.unparse(arg) for arg in node.args[:2])
        if "reviewer" in text.casefold() or any(engine in text for engine in ENGINES):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def engine_imports(tree: ast.Module) -> list[str]:
    return [
        f"line {node.lineno}: {alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name in ENGINES
    ]


def test_no_module_probes_which_reviewer_it_holds() -> None:
    found = {name: hits for name, tree in modules() if (hits := probes(tree))}
    assert found == {}


def test_only_the_choosers_name_an_engine() -> None:
    found = {
        name: hits
        for name, tree in modules()
        if not any(name == c or name.startswith(c + "/") for c in CHOOSERS) and (hits := engine_imports(tree))
    }
    assert found == {}


def test_the_probe_check_sees_the_shapes_it_forbids() -> None:
    """The checks above are only worth something if they catch what issue 19 found."""
    for source in (
        "judge = bot.reviewer if isinstance(bot.reviewer, LlmReviewer) else None",
        'close = getattr(self.reviewer, "aclose", None)',
        'used = int(getattr(reviewer, "tokens_used", 0))',
        "ok = hasattr(engine, 'health') or isinstance(engine, BuiltinReviewer)",
    ):
        assert probes(ast.parse(source)), source
    assert not probes(ast.parse('x = getattr(gh, "installation_id", None)'))
    assert engine_imports(ast.parse("from ..review.llm import LlmReviewer"))


async def _never_read() -> ModelInputs:
    raise AssertionError("the built-in reviewer must not ask for the model's inputs")


async def test_the_builtin_reviewer_has_honest_defaults() -> None:
    reviewer = BuiltinReviewer(analyzers=[])

    async def read(paths: object) -> dict[str, None]:
        return {}

    context = PullContext(
        repo="o/r", pr_number=1, title="t", author_login="a", base_sha="b", head_sha="h", files=(), read=read
    )
    assert await reviewer.prepare(context, _never_read) is context
    assert reviewer.mechanical() is reviewer
    assert reviewer.judges_threads() is False
    question = ThreadQuestion(repo="o/r", pr_number=1, thread_id=1, head_sha="h", finding="f", code="c")
    assert await reviewer.judge_thread(question) is None
    assert reviewer.health() is None
    assert reviewer.tokens_used() == 0
    await reviewer.aclose()


async def test_an_engine_declares_the_id_its_analyses_are_cached_by() -> None:
    """The analysis cache is keyed by the engine's declared id (never its class name): an engine
    that declares none cannot be made, and two engines never share an analysis."""

    class Undeclared(Reviewer):
        async def review(self, context: PullContext) -> ReviewResult:
            raise AssertionError("never reviewed")

    with pytest.raises(TypeError, match="id"):
        Undeclared()  # type: ignore[abstract]
    where = {"LLM_BASE_URL": "http://127.0.0.1:9", "LLM_API_KEY": "k"}  # never asked
    models = [build_reviewer(load_llm_settings({**where, "LLM_MODEL": name})) for name in ("a", "b")]
    try:
        assert len({BuiltinReviewer().id, *(m.id for m in models)}) == 3
    finally:
        for m in models:
            await m.aclose()
