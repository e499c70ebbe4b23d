"""Seams that do not leak (issue 28): what a caller needs of the GitHub client and of an event is
typed on it, so nobody probes for it. Read from the source, so a probe added anywhere fails."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parent.parent / "app"
PROBES = {"isinstance", "getattr", "hasattr"}


def probe_calls(tree: ast.Module) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PROBES
    ]


def client_probes(tree: ast.Module) -> list[str]:
    """Probes of a GitHub client: ``getattr(gh, "installation_id", None)``, ``isinstance(ctx.gh, ...)``."""
    found = []
    for node in probe_calls(tree):
        subject = node.args[0] if node.args else None
        name = subject.id if isinstance(subject, ast.Name) else getattr(subject, "attr", "")
        if name == "gh" or "client" in name.casefold():
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_probes_the_github_client() -> None:
    found = {
        path.relative_to(APP).as_posix(): hits
        for path in sorted(APP.rglob("*.py"))
        if (hits := client_probes(ast.parse(path.read_text(), str(path))))
    }
    assert found == {}


@pytest.mark.parametrize(
    ("source", "probes"),
    [
        ('x = getattr(gh, "installation_id", None)', True),
        ("ok = isinstance(ctx.gh, InstallationClient)", True),
        ('ok = hasattr(self.client, "pacer")', True),
        ('x = getattr(record, "gh", None)', False),
    ],
)
def test_the_client_check_sees_the_shapes_it_forbids(source: str, probes: bool) -> None:
    assert bool(client_probes(ast.parse(source))) is probes


def test_the_worker_probes_nothing() -> None:
    """The worker (and the job it runs) reads what it needs of an event (``pr_number``) and of
    an error (``except`` clauses) from their types, not by asking what they are."""
    for name in ("jobs/worker.py", "jobs/runner.py"):
        tree = ast.parse((APP / name).read_text())
        assert [f"line {node.lineno}: {ast.unparse(node)}" for node in probe_calls(tree)] == [], name


def engine_uses(tree: ast.Module) -> list[str]:
    """``store.engine``, ``self.backend.engine`` or an ``AsyncEngine`` held: the database without
    its backend."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "engine":
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.alias) and node.name == "AsyncEngine":
            found.append(f"import of {node.name}")
    return found


def test_only_the_store_holds_the_database_engine() -> None:
    """Other modules' tables (learnings, the model's memory, recovery, metrics) go through the
    store's ``Backend`` (``read``, ``begin``, ``upsert``), as the store's own reads do."""
    found = {
        name: hits
        for path in sorted(APP.rglob("*.py"))
        if not (name := path.relative_to(APP).as_posix()).startswith("store/")
        and (hits := engine_uses(ast.parse(path.read_text(), str(path))))
    }
    assert found == {}
    assert engine_uses(ast.parse("async with self.store.engine.connect() as conn: pass"))
    assert engine_uses(ast.parse("from sqlalchemy.ext.asyncio import AsyncEngine"))
