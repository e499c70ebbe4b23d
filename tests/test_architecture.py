"""docs/ARCHITECTURE.md stays true where a test can tell: every path it names exists (and every path
the other pages and the README name), every package of ``app`` has its line in the folder table,
and what the four recipes tell a contributor to write or touch is where they say."""

from __future__ import annotations

import argparse
import ast
import graphlib
import inspect
import re
from pathlib import Path

import grimp
import pytest

from app.cli import play, reviewing, service
from app.commands import HELP_TEXT, Command
from app.review.analyzers import catalogue, default_analyzers
from app.review.core.model import Reviewer
from app.review.llm import configured_reviewer
from app.store.backend import Backend
from app.store.connect import open_backend
from app.usecases.commands import answer_command

ROOT = Path(__file__).resolve().parents[1]
TEXT = (ROOT / "docs/ARCHITECTURE.md").read_text(encoding="utf-8")
# Every page that may name a path of app/ for a reader to open: the README and the site's pages.
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
EXAMPLES = {"app/store/pgbouncer.py"}  # the storage recipe's example: a backend still to write


def named_paths(text: str) -> set[str]:
    return set(re.findall(r"`(app/[\w./-]*)`", text))


def test_every_path_it_names_exists() -> None:
    paths = named_paths(TEXT)
    assert len(paths) > 40
    assert {p for p in paths - EXAMPLES if not (ROOT / p).exists()} == set()


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_path_a_page_names_exists(page: Path) -> None:
    paths = named_paths(page.read_text(encoding="utf-8"))
    assert {p for p in paths - EXAMPLES if not (ROOT / p).exists()} == set()


def test_the_pages_name_paths_to_check() -> None:
    # the operator's page maps each step of a delivery to its module: a table that names paths
    assert len(named_paths((ROOT / "docs/operations.md").read_text(encoding="utf-8"))) > 20


def test_every_package_of_app_is_in_the_folder_table() -> None:
    table = set(re.findall(r"^\| `(app/[\w/]+/)` \|", TEXT, re.MULTILINE))
    packages = {
        f"{p.parent.relative_to(ROOT).as_posix()}/"
        for p in (ROOT / "app").rglob("__init__.py")
        if p.parent != ROOT / "app"
    }
    listed_parents = {p for p in packages if p in table or any(p.startswith(t) for t in table)}
    assert packages - listed_parents == set()
    assert table <= packages


def test_the_recipes_name_what_is_there() -> None:
    # a rule: declared by an analyzer of default_analyzers, listed by the catalogue
    assert catalogue(default_analyzers()) and all(a.rules for a in default_analyzers())
    # a reviewer: the id is the one thing an engine must declare; one function chooses
    assert Reviewer.__abstractmethods__ == frozenset({"id"})
    assert "reviewer" in inspect.signature(configured_reviewer).parameters["settings"].annotation.lower()
    # a storage backend: the protocol and the one place that chooses it
    assert "Backend" in str(inspect.signature(open_backend).return_annotation)
    assert {"record", "claim", "finish", "read", "begin"} <= set(dir(Backend))
    # a command: every one has its answer's case and its help line
    source = inspect.getsource(answer_command)
    assert "assert_never(command)" in source
    assert all(f"Command.{c.name}" in source for c in Command)
    assert all(f"{{slug}} {c.value}" in HELP_TEXT for c in Command if c is not Command.HELP)
    for group in (service, reviewing, play):
        group.add_commands(argparse.ArgumentParser().add_subparsers())


# The top of app/: the composition roots and the few models every layer shares; everything else
# lives in the package of its layer. A module added here needs its reason in this table.
TOP_MODULES = {
    "__init__.py": "the version",
    "__main__.py": "python -m app: the command line's composition root",
    "runtime.py": "the serving bot's composition root (serve, worker)",
    "offline.py": "the reviewer without GitHub's webhooks (review, eval): a composition root",
    "events.py": "the flat events every layer reads",
    "guards.py": "who the bot is, and which events are its own",
    "commands.py": "the mention commands: parsed by handlers, answered by use cases",
    "metrics.py": "the one registry of counters every layer writes",
    "tenancy.py": "whose turn it is: set by the jobs, read by the review's analysis pool",
}


def test_the_top_of_app_holds_the_roots_and_the_shared_models_only() -> None:
    top = {p.name for p in (ROOT / "app").glob("*.py")}
    assert top == set(TOP_MODULES)
    assert len(top - {"__init__.py"}) <= 12


def test_every_package_says_its_one_job_in_one_line() -> None:
    for init in (ROOT / "app").rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc, init
        lines = doc.splitlines()
        assert len(lines) == 1 or lines[1] == "", (init, lines[:2])  # a summary line, then the rest


def test_no_import_circle_anywhere_in_app() -> None:
    """Modules, not only packages, and typing-only imports included (grimp reads them all)."""
    graph = grimp.build_graph("app")
    imports = {m: graph.find_modules_directly_imported_by(m) - {m} for m in graph.modules}
    order = graphlib.TopologicalSorter(imports)
    try:
        order.prepare()
    except graphlib.CycleError as cycle:
        raise AssertionError(f"import circle: {' -> '.join(cycle.args[1])}") from None
