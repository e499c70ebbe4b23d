"""An import-linter contract for the cycle its own ``acyclic_siblings`` does not see: a package
whose ``__init__`` imports a module inside it that imports the package back (directly or through
other modules). Only the import's position (a function-local import, a late import at the bottom)
keeps such a cycle working, and which module is imported first decides whether it does.

Configured in ``pyproject.toml`` (``contract_types``), run by ``lint-imports`` from the repository
root (which is on its ``sys.path``), so by CI, pre-commit and ``tests/test_imports.py`` alike.
"""

from __future__ import annotations

import grimp
from importlinter.application import contract_utils, output
from importlinter.application.contract_utils import AlertLevel
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


def parent_child_cycles(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """Each cycle as ``(package, child, ..., package)``: the package imports a module inside it
    whose shortest chain of imports leads back to the package (pure over the graph)."""
    cycles = []
    # External packages are squashed into one node each (no children to look at).
    packages = [m for m in graph.modules if not graph.is_module_squashed(m) and graph.find_children(m)]
    for package in sorted(packages):
        for child in sorted(graph.find_modules_directly_imported_by(package)):
            if child.startswith(f"{package}."):
                back = graph.find_shortest_chain(importer=child, imported=package)
                if back:
                    cycles.append((package, *back))
    return cycles


class NoParentChildCycles(Contract):
    type_name = "no_parent_child_cycles"

    ignore_imports = fields.SetField(subfield=fields.ImportExpressionField(), required=False)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        removal = contract_utils.remove_ignored_imports_and_report(
            graph=graph,
            ignore_imports=self.ignore_imports,  # type: ignore[arg-type]  # a field, read as its value
            unmatched_alerting=AlertLevel.ERROR,  # an allowance that no longer matches must go
        )
        cycles = parent_child_cycles(graph)
        return ContractCheck(
            kept=not cycles,
            warnings=list(removal.warnings),
            ignored_import_count=removal.ignored_import_count,
            metadata={"cycles": cycles},
        )

    def render_broken_contract(self, check: ContractCheck) -> None:
        cycles: list[tuple[str, ...]] = check.metadata["cycles"]
        for cycle in cycles:
            output.print_error(f"{cycle[0]} imports {cycle[1]}, which imports it back:")
            output.print_error(f"-   {' -> '.join(cycle)}", bold=False)
            output.new_line()
