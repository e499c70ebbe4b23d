"""What a colleague would open beside a changed Python function, for the model's prompt: the
signatures and docstrings of the in-repository functions and classes the changed lines call, and
the call sites of the changed public functions. Static analysis (``ast``) of texts already read;
nothing is imported or run. Ranked (the most called first, then call sites in file order) and cut
to a budget; the cut is counted so the summary can say it.

``wanted_paths`` says which files to read besides the changed ones: the in-repository modules the
changed files import (resolved against the repository's tree) and the Python files beside them
(where their callers most likely are), so the reviewer reads them in one batch.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

__all__ = ["Related", "Sources", "imported_modules", "related_context", "wanted_paths"]

MAX_SIBLINGS = 20  # Python files read beside a changed one, for call sites
MAX_DOC_LINES = 4
MAX_SITE_CHARS = 160
MAX_SITES_PER_FUNCTION = 5


@dataclass(frozen=True, slots=True)
class Related:
    lines: tuple[str, ...] = ()  # rendered, for the prompt
    shown: frozenset[tuple[str, int]] = frozenset()  # (path, line) of what is shown
    cut: int = 0  # entries left out for the budget


@dataclass(slots=True)
class _Entry:
    rank: tuple[int, int, str]
    lines: list[str]
    shown: set[tuple[str, int]] = field(default_factory=set)


def _parse(text: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():  # an invalid escape in the PR's code is not ours to print
            warnings.simplefilter("ignore", SyntaxWarning)
            return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _package(path: str) -> list[str]:
    parts = list(PurePosixPath(path).with_suffix("").parts)
    return parts[:-1]


def imported_modules(path: str, text: str) -> dict[str, tuple[str, str | None]]:
    """Local name -> (dotted module, imported attribute or None), relative imports resolved
    against the file's own package (``src/`` kept: it is resolved against the tree later)."""
    tree = _parse(text)
    out: dict[str, tuple[str, str | None]] = {}
    if tree is None:
        return out
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".", 1)[0]
                out[local] = (alias.name if alias.asname else alias.name.split(".", 1)[0], None)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _package(path)
                package = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                base = ".".join([*package, *([base] if base else [])])
            for alias in node.names:
                if alias.name != "*":
                    out[alias.asname or alias.name] = (base, alias.name)
    return out


def _module_file(module: str, files: Collection[str]) -> str | None:
    """The repository file of a dotted module (``pkg.mod`` -> ``pkg/mod.py``, also under ``src/``)."""
    stem = module.replace(".", "/")
    for candidate in (f"{stem}.py", f"{stem}/__init__.py", f"src/{stem}.py", f"src/{stem}/__init__.py"):
        if candidate in files:
            return candidate
    return None


def _resolve(local: tuple[str, str | None], files: Collection[str]) -> tuple[str, str | None] | None:
    """(file, name in it) for an imported name: ``from pkg import mod`` names a module, ``from
    pkg.mod import f`` a name in one."""
    module, attribute = local
    if attribute is not None:
        as_module = _module_file(f"{module}.{attribute}" if module else attribute, files)
        if as_module is not None:
            return as_module, None
    found = _module_file(module, files) if module else None
    return (found, attribute) if found is not None else None


def wanted_paths(changed: Mapping[str, str], files: Collection[str]) -> list[str]:
    """The files to read besides ``changed`` (path -> text at head): the in-repository modules
    they import, then the Python files beside them."""
    wanted: dict[str, None] = {}
    for path, text in changed.items():
        for local in imported_modules(path, text).values():
            resolved = _resolve(local, files)
            if resolved is not None and resolved[0] not in changed:
                wanted[resolved[0]] = None
    for path in changed:
        folder = str(PurePosixPath(path).parent)
        siblings = sorted(
            f
            for f in files
            if f.endswith(".py") and str(PurePosixPath(f).parent) == folder and f not in changed
        )
        wanted.update(dict.fromkeys(siblings[:MAX_SIBLINGS]))
    return list(wanted)


def _definitions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    """Top-level functions and classes, and methods as ``Class.method``."""
    out: dict[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = node
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                    out[f"{node.name}.{member.name}"] = member
    return out


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, tree: ast.Module) -> str:
    if isinstance(node, ast.ClassDef):
        init = next(
            (
                m
                for m in node.body
                if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and m.name == "__init__"
            ),
            None,
        )
        bases = f"({', '.join(ast.unparse(b) for b in node.bases)})" if node.bases else ""
        return f"class {node.name}{bases}" + (f": __init__({ast.unparse(init.args)})" if init else "")
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    return f"{prefix} {node.name}({ast.unparse(node.args)}){returns}"


def _called(tree: ast.Module, lines: Collection[int] | None = None) -> list[tuple[int, list[str]]]:
    """(line, dotted parts) of every call (whose lines meet ``lines``, when given): ``f(...)`` ->
    ["f"], ``mod.f(...)`` -> ["mod", "f"]."""
    wanted = None if lines is None else set(lines)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if wanted is not None and wanted.isdisjoint(range(node.lineno, (node.end_lineno or node.lineno) + 1)):
            continue
        parts: list[str] = []
        func: ast.expr = node.func
        while isinstance(func, ast.Attribute):
            parts.insert(0, func.attr)
            func = func.value
        if isinstance(func, ast.Name):
            parts.insert(0, func.id)
            out.append((node.lineno, parts))
    return out


def _changed_public_functions(tree: ast.Module, lines: Collection[int]) -> list[str]:
    names = []
    for name, node in _definitions(tree).items():
        if isinstance(node, ast.ClassDef) or any(part.startswith("_") for part in name.split(".")):
            continue
        if any(node.lineno <= n <= (node.end_lineno or node.lineno) for n in lines):
            names.append(name.rsplit(".", 1)[-1])
    return names


class Sources:
    """The texts read for one review (path -> text), each parsed once, with its calls indexed
    by the called name (the last part of the dotted name)."""

    def __init__(self, texts: Mapping[str, str]) -> None:
        self.texts = texts
        self._trees: dict[str, ast.Module | None] = {}
        self._calls: dict[str, dict[str, list[int]]] = {}

    def tree(self, path: str) -> ast.Module | None:
        if path not in self._trees:
            self._trees[path] = _parse(self.texts[path]) if path in self.texts else None
        return self._trees[path]

    def calls_of(self, path: str, name: str) -> list[int]:
        if path not in self._calls:
            tree = self.tree(path)
            index: dict[str, list[int]] = {}
            for line, parts in _called(tree) if tree is not None else ():
                index.setdefault(parts[-1], []).append(line)
            self._calls[path] = index
        return sorted(self._calls[path].get(name, ()))


def related_context(
    path: str,
    text: str,
    changed: Collection[int],
    sources: Sources,
    files: Collection[str],
    *,
    budget_chars: int,
) -> Related:
    """The definitions the changed lines of ``path`` call and the call sites of its changed public
    functions, found in ``sources`` (what was read), within ``budget_chars``."""
    tree = _parse(text)
    if tree is None or not changed:
        return Related()
    imports = imported_modules(path, text)
    tree_of = sources.tree

    # Callees: a name imported from an in-repository module, a module attribute, or a local one.
    counts: dict[tuple[str, str], list[int]] = {}
    for line, parts in _called(tree, changed):
        target: tuple[str, str] | None = None
        if parts[0] in imports:
            resolved = _resolve(imports[parts[0]], files)
            if resolved is not None:
                file, name = resolved
                rest = parts[1:]
                qualified = ".".join(([name] if name else []) + rest)
                target = (file, qualified) if qualified else None
        elif len(parts) == 1:
            target = (path, parts[0])
        if target is not None:
            counts.setdefault(target, []).append(line)
    entries: list[_Entry] = []
    for (file, name), at in counts.items():
        source_tree = tree if file == path else tree_of(file)
        if source_tree is None:
            continue
        definitions = _definitions(source_tree)
        node = definitions.get(name) or definitions.get(name.rsplit(".", 1)[-1])
        if node is None or (
            file == path and any(node.lineno <= n <= (node.end_lineno or 0) for n in changed)
        ):
            continue  # not found, or the changed code itself (already in the prompt)
        doc = (ast.get_docstring(node) or "").strip().splitlines()[:MAX_DOC_LINES]
        rendered = [
            f"- {file}:{node.lineno} (called on line {', '.join(map(str, sorted(set(at))))}): "
            f"{_signature(node, source_tree)}"
        ]
        rendered += [f"    {line}".rstrip() for line in doc]
        entries.append(_Entry((0, -len(at), f"{min(at):08d}"), rendered, {(file, node.lineno)}))
    # Call sites of the changed public functions, in the other files read.
    for name in _changed_public_functions(tree, changed):
        sites = 0
        for file in sorted(sources.texts):
            if file == path or sites >= MAX_SITES_PER_FUNCTION:
                continue
            at = sources.calls_of(file, name)
            file_lines = sources.texts[file].splitlines() if at else []
            for line in at:
                if sites >= MAX_SITES_PER_FUNCTION or not 0 < line <= len(file_lines):
                    continue
                sites += 1
                code = file_lines[line - 1].strip()[:MAX_SITE_CHARS]
                entries.append(
                    _Entry(
                        (1, 0, f"{file}:{line:08d}"),
                        [f"- {file}:{line} calls {name}: {code}"],
                        {(file, line)},
                    )
                )
    entries.sort(key=lambda e: e.rank)
    kept: list[str] = []
    shown: set[tuple[str, int]] = set()
    used = 0
    cut = 0
    for entry in entries:
        size = sum(len(line) + 1 for line in entry.lines)
        if used + size > budget_chars:
            cut += 1
            continue
        used += size
        kept += entry.lines
        shown |= entry.shown
    return Related(tuple(kept), frozenset(shown), cut)
