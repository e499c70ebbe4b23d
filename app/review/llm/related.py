"""What a colleague would open beside a changed Python function, for the model's prompt: the
signatures and docstrings of the in-repository functions and classes the changed lines call, and
the call sites of the changed public functions. Static analysis (``ast``) of texts already read;
nothing is imported or run, and all of it runs inside the execution boundary (``bounded``).
Ranked (the most called first, then call sites in file order) and cut to a budget; the cut is
counted so the summary can say it.

``wanted_paths`` says which files to read besides the changed ones: the in-repository modules the
changed files import (resolved against the repository's tree) and the Python files beside them
(where their callers most likely are), so the reviewer reads them in one batch.

One ``Index`` per review: each text parsed once, its definitions and calls indexed once, so the
work grows with the size of what was read, not with the number of callees times the file.
"""

from __future__ import annotations

import ast
import bisect
import warnings
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

__all__ = [
    "Definition",
    "Imports",
    "Index",
    "Related",
    "imported_modules",
    "parse",
    "related_context",
    "wanted_paths",
]

MAX_SIBLINGS = 20  # Python files read beside a changed one, for call sites
MAX_DOC_LINES = 4
MAX_SITE_CHARS = 160
MAX_SITES_PER_FUNCTION = 5

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
Imports = dict[str, tuple[str, str | None]]  # local name -> (dotted module, imported attribute or None)


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


def parse(text: str) -> ast.Module:
    """The module's tree. Raises SyntaxError, ValueError (not source text) or RecursionError
    (nested too deeply), for the caller to name."""
    with warnings.catch_warnings():  # an invalid escape in the PR's code is not ours to print
        warnings.simplefilter("ignore", SyntaxWarning)
        return ast.parse(text)


def _meets(changed: Sequence[int], first: int, last: int) -> bool:
    """Whether ``changed`` (sorted) holds a line in ``first..last``."""
    at = bisect.bisect_left(changed, first)
    return at < len(changed) and changed[at] <= last


def _package(path: str) -> list[str]:
    parts = list(PurePosixPath(path).with_suffix("").parts)
    return parts[:-1]


def imported_modules(path: str, tree: ast.Module) -> Imports:
    """Local name -> (dotted module, imported attribute or None), relative imports resolved
    against the file's own package (``src/`` kept: it is resolved against the tree later)."""
    out: Imports = {}
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


def wanted_paths(imports: Mapping[str, Imports], files: Collection[str]) -> list[str]:
    """The files to read besides the changed ones (``imports``: each changed file's
    ``imported_modules``, empty where it did not parse): the in-repository modules they import,
    then the Python files beside them."""
    wanted: dict[str, None] = {}
    for names in imports.values():
        for local in names.values():
            resolved = _resolve(local, files)
            if resolved is not None and resolved[0] not in imports:
                wanted[resolved[0]] = None
    beside: dict[str, list[str]] = {}  # folder -> its Python files, each folder sorted once
    for f in files:
        if f.endswith(".py") and f not in imports:
            beside.setdefault(str(PurePosixPath(f).parent), []).append(f)
    for siblings in beside.values():
        siblings.sort()
    for path in imports:
        wanted.update(dict.fromkeys(beside.get(str(PurePosixPath(path).parent), [])[:MAX_SIBLINGS]))
    return list(wanted)


def _definitions(tree: ast.Module) -> dict[str, Definition]:
    """Top-level functions and classes, and methods as ``Class.method``."""
    out: dict[str, Definition] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = node
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                    out[f"{node.name}.{member.name}"] = member
    return out


def _signature(node: Definition) -> str:
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


@dataclass(frozen=True, slots=True)
class _Call:
    line: int
    end_line: int
    parts: tuple[str, ...]  # ``f(...)`` -> ("f",), ``mod.f(...)`` -> ("mod", "f")


def _calls(tree: ast.Module) -> list[_Call]:
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        parts: list[str] = []
        func: ast.expr = node.func
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if isinstance(func, ast.Name):
            parts.append(func.id)
            out.append(_Call(node.lineno, node.end_lineno or node.lineno, tuple(reversed(parts))))
    return out


@dataclass(frozen=True, slots=True)
class _Indexed:
    tree: ast.Module
    lines: list[str]
    definitions: dict[str, Definition]
    imports: Imports
    calls: list[_Call]


class Index:
    """The definition index of one review: every text read (path -> text), each parsed once, its
    definitions, imports and calls indexed once; the call sites of every name across the files,
    in file and line order. Filled (``add``) before it is asked."""

    def __init__(self) -> None:
        self._files: dict[str, _Indexed] = {}
        self._sites: dict[str, list[tuple[str, int]]] = {}  # called name (last part) -> (path, line)
        self._sorted: set[str] = set()

    def add(self, path: str, text: str) -> None:
        """Parse and index one file; raises what ``parse`` raises (then nothing of it is indexed)."""
        tree = parse(text)
        calls = _calls(tree)
        imports = imported_modules(path, tree)
        self._files[path] = _Indexed(tree, text.splitlines(), _definitions(tree), imports, calls)
        for call in calls:
            self._sites.setdefault(call.parts[-1], []).append((path, call.line))

    def sites(self, name: str) -> list[tuple[str, int]]:
        """Where ``name`` is called, by path then line."""
        found = self._sites.get(name, [])
        if name not in self._sorted:
            found.sort()
            self._sorted.add(name)
        return found

    def indexed(self, path: str) -> _Indexed | None:
        return self._files.get(path)


def _changed_public_functions(definitions: Mapping[str, Definition], changed: Sequence[int]) -> list[str]:
    names = []
    for name, node in definitions.items():
        if isinstance(node, ast.ClassDef) or any(part.startswith("_") for part in name.split(".")):
            continue
        if _meets(changed, node.lineno, node.end_lineno or node.lineno):
            names.append(name.rsplit(".", 1)[-1])
    return names


def related_context(
    path: str,
    changed: Collection[int],
    index: Index,
    files: Collection[str],
    *,
    budget_chars: int,
) -> Related:
    """The definitions the changed lines of ``path`` call and the call sites of its changed public
    functions, found in ``index`` (what was read), within ``budget_chars``."""
    own = index.indexed(path)
    if own is None or not changed:
        return Related()
    lines = sorted(changed)

    # Callees: a name imported from an in-repository module, a module attribute, or a local one.
    counts: dict[tuple[str, str], list[int]] = {}
    for call in own.calls:
        if not _meets(lines, call.line, call.end_line):
            continue
        parts = call.parts
        target: tuple[str, str] | None = None
        if parts[0] in own.imports:
            resolved = _resolve(own.imports[parts[0]], files)
            if resolved is not None:
                file, name = resolved
                qualified = ".".join(([name] if name else []) + list(parts[1:]))
                target = (file, qualified) if qualified else None
        elif len(parts) == 1:
            target = (path, parts[0])
        if target is not None:
            counts.setdefault(target, []).append(call.line)
    entries: list[_Entry] = []
    for (file, name), at in counts.items():
        source = own if file == path else index.indexed(file)
        if source is None:
            continue
        node = source.definitions.get(name) or source.definitions.get(name.rsplit(".", 1)[-1])
        if node is None or (file == path and _meets(lines, node.lineno, node.end_lineno or 0)):
            continue  # not found, or the changed code itself (already in the prompt)
        doc = (ast.get_docstring(node) or "").strip().splitlines()[:MAX_DOC_LINES]
        rendered = [
            f"- {file}:{node.lineno} (called on line {', '.join(map(str, sorted(set(at))))}): "
            f"{_signature(node)}"
        ]
        rendered += [f"    {line}".rstrip() for line in doc]
        entries.append(_Entry((0, -len(at), f"{min(at):08d}"), rendered, {(file, node.lineno)}))
    # Call sites of the changed public functions, in the other files read.
    for name in dict.fromkeys(_changed_public_functions(own.definitions, lines)):
        sites = 0
        for file, line in index.sites(name):
            if sites >= MAX_SITES_PER_FUNCTION:
                break
            caller = index.indexed(file)
            if file == path or caller is None or not 0 < line <= len(caller.lines):
                continue
            sites += 1
            code = caller.lines[line - 1].strip()[:MAX_SITE_CHARS]
            rendered = [f"- {file}:{line} calls {name}: {code}"]
            entries.append(_Entry((1, 0, f"{file}:{line:08d}"), rendered, {(file, line)}))
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
