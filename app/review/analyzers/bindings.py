"""What a Python module binds on purpose, read from its text: the names it lists in ``__all__``
and the module-level aliases it keeps. Both look unused to a linter and are not: an import
listed in ``__all__`` is the module's interface, an alias (``import a as b``, ``Old = New``) is
kept for its callers. Pure functions of the text; ``ast`` only parses it (in the analysis child,
like every analyzer), nothing is executed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ..core.refusals import EXHAUSTED

__all__ = ["binds_alias", "exported_imports"]

_ALIAS = re.compile(
    r"(?:from\s+[\w.]+\s+)?import\s+[^#]*\bas\s+\w+"
    r"|[A-Za-z_]\w*\s*=\s*(?!(?:None|True|False)\s*(?:#.*)?$)[A-Za-z_][\w.]*\s*(?:#.*)?$"
)
_ALL = "__all__"
_NEWLINE = re.compile(r"\r\n?|\n")  # what ends a line for Python's parser
# Statements whose bodies still run at module level (``try: import x``); a def or class does not.
_NESTED = (ast.If, ast.Try, ast.TryStar, ast.With, ast.For, ast.While)


def binds_alias(line: str) -> bool:
    """Whether the line binds a module-level alias (``import a as b``, ``from m import a as b``,
    ``OldName = NewName``; not a constant such as ``None``): kept for compatibility more often
    than not, so no one-click suggestion deletes or rewrites it."""
    return _ALIAS.match(line) is not None


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for statement in body:
        yield statement
        if isinstance(statement, _NESTED):
            for field in ("body", "orelse", "finalbody"):
                yield from _module_level(getattr(statement, field, []))
            for handler in getattr(statement, "handlers", []):
                yield from _module_level(handler.body)


def _strings(node: ast.expr | None) -> list[str]:
    """The string literals of ``["a", "b"]``, ``("a",)``, ``{"a"}`` and sums of them (the parts
    that are literal: ``["a"] + other.__all__`` gives ``a``). Without recursion: a sum of
    thousands of lists parses, and must not exhaust the stack here."""
    found: list[str] = []
    pending = [node]
    while pending:
        part = pending.pop()
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            found.append(part.value)
        elif isinstance(part, ast.List | ast.Tuple | ast.Set):
            found += [e.value for e in part.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        elif isinstance(part, ast.BinOp) and isinstance(part.op, ast.Add):
            pending += [part.right, part.left]
    return found


def _listed(statement: ast.stmt) -> list[str]:
    """The names one module-level statement adds to ``__all__``: assigned (annotated or not),
    ``+=``, ``.extend([...])``, ``.append("...")``."""
    if isinstance(statement, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == _ALL for t in statement.targets
    ):
        return _strings(statement.value)
    if isinstance(statement, ast.AnnAssign | ast.AugAssign):
        target = statement.target
        if isinstance(target, ast.Name) and target.id == _ALL:
            return _strings(statement.value)
        return []
    if isinstance(statement, ast.Expr) and isinstance(call := statement.value, ast.Call):
        method = call.func
        if (
            isinstance(method, ast.Attribute)
            and isinstance(method.value, ast.Name)
            and method.value.id == _ALL
            and method.attr in ("extend", "append")
        ):
            return [name for argument in call.args for name in _strings(argument)]
    return []


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, *EXHAUSTED):  # the syntax check says so; nothing to read
        return None


def exported_imports(text: str) -> frozenset[tuple[int, int]]:
    """Where the module-level imports that bind a name listed in ``__all__`` are, as ruff locates
    a diagnostic on them: (row, column), both from 1, the column counted in characters."""
    module = _parse(text)
    if module is None:
        return frozenset()
    statements = list(_module_level(module.body))
    exported = {name for statement in statements for name in _listed(statement)}
    if not exported:
        return frozenset()
    lines = _NEWLINE.split(text)
    places: set[tuple[int, int]] = set()
    for statement in statements:
        if not isinstance(statement, ast.Import | ast.ImportFrom):
            continue
        for alias in statement.names:
            bound = alias.asname or alias.name.split(".")[0]
            if bound in exported and 0 < alias.lineno <= len(lines):
                # ast counts UTF-8 bytes, ruff characters
                prefix = lines[alias.lineno - 1].encode()[: alias.col_offset]
                places.add((alias.lineno, len(prefix.decode(errors="replace")) + 1))
    return frozenset(places)
