"""The parent/child cycle contract (``tests/import_contracts.py``) on small import graphs, table-driven:
what it must report and what it must leave alone. ``lint-imports`` runs it over ``app``."""

from __future__ import annotations

import grimp
import pytest

from tests.import_contracts import parent_child_cycles


def graph_of(imports: list[tuple[str, str]]) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for module in ["p", "p.a", "p.b", "p.sub", "p.sub.c", "q"]:
        graph.add_module(module)
    for importer, imported in imports:
        graph.add_import(importer=importer, imported=imported)
    return graph


@pytest.mark.parametrize(
    ("imports", "cycles"),
    [
        ([], []),
        # The package re-exports a child that needs nothing of it: no cycle.
        ([("p", "p.a")], []),
        # Children importing the package, which imports none of them: no cycle.
        ([("p.a", "p"), ("p.b", "p")], []),
        # Today's analyzers: the package imports its children, each imports the package.
        ([("p", "p.a"), ("p.a", "p"), ("p", "p.b"), ("p.b", "p")], [("p", "p.a", "p"), ("p", "p.b", "p")]),
        # Back through a sibling.
        ([("p", "p.a"), ("p.a", "p.b"), ("p.b", "p")], [("p", "p.a", "p.b", "p")]),
        # Back through a module outside the package.
        ([("p", "p.a"), ("p.a", "q"), ("q", "p")], [("p", "p.a", "q", "p")]),
        # A subpackage and its own child.
        ([("p.sub", "p.sub.c"), ("p.sub.c", "p.sub")], [("p.sub", "p.sub.c", "p.sub")]),
        # A grandchild the package imports, which imports the package.
        ([("p", "p.sub.c"), ("p.sub.c", "p")], [("p", "p.sub.c", "p")]),
        # Importing outside the package is never a parent/child cycle here (siblings' contract).
        ([("p", "q"), ("q", "p")], []),
    ],
)
def test_parent_child_cycles(imports: list[tuple[str, str]], cycles: list[tuple[str, ...]]) -> None:
    assert parent_child_cycles(graph_of(imports)) == cycles
