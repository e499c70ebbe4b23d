"""Public API breaks between the base and the head of a module the pull request changed: a public
function, method or class removed (or renamed), a parameter removed, renamed or moved, a new
required parameter (every existing call lacks it), a default changed, a function turned async or
back. Concerns, never blockers: most API changes are deliberate, so the finding says what changed
and asks whether the callers and the changelog know; nits in a package at 0.x (its declared
version at the base), whose API is not a promise yet.

Read with griffe's static visitor (the AST, never an import: no inspection, no extensions), one
module at a time from the two texts: ``api_findings`` is a pure function of (path, base text,
head text, added lines). Public means not underscored (the module's ``__all__`` when it has one),
not in tests, and inside a package (``__init__.py`` all the way up: a directory of scripts is
nobody's API). Imported names are not the module's API (griffe's rule), so a re-export is not
followed.
"""

from __future__ import annotations

import configparser
import contextlib
import logging
import re
import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

import griffe

from ..core.codespan import code_span
from ..core.model import ChangedFile, FileContent, Finding, RepoTree, Severity, Skipped
from ..core.refusals import EXHAUSTED, TOMLDecodeError, load_toml
from .base import AnalysisInput, AnalyzerOutput, Rule, finding, is_python, is_test_path

__all__ = [
    "RULE",
    "ApiBreakAnalyzer",
    "api_changes",
    "api_findings",
    "capped",
    "defined_names",
    "in_a_package",
    "initial_development",
    "is_public_module",
    "module_name",
    "package_major",
    "positional_by_convention",
    "same_value",
    "version_paths",
]

RULE = "api/break"
_MAJOR = re.compile(r"\s*v?(\d+)\.")
_DUNDER_VERSION = re.compile(
    r"""^(?:__version__\s*(?::\s*str\s*)?=|\s*version\s*=)\s*["']v?(\d+)\.""", re.MULTILINE
)  # a module's ``__version__ = "0.9"``, or ``version="0.9"`` in ``setup.py``
BASE_STATUSES = ("modified", "renamed")  # a file the base also had
MAX_FINDINGS = 5  # per review; the rest in one more

# griffe logs what it skips (an unresolved alias) at debug level; nothing the review needs.
logging.getLogger("griffe").setLevel(logging.WARNING)


def module_name(path: str) -> str:
    """``src/pkg/mod.py`` -> ``pkg.mod``; ``pkg/__init__.py`` -> ``pkg``."""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[0] == "src":
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) or "module"


def is_public_module(path: str) -> bool:
    """A Python file outside tests whose module path has no underscored part (dunders aside)."""
    if not is_python(path) or is_test_path(path):
        return False
    parts = PurePosixPath(path).with_suffix("").parts
    return not any(p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in parts)


def in_a_package(path: str, tree: RepoTree | None) -> bool:
    """Whether a user imports the module as part of a package: every directory above it (a
    leading ``src/`` aside) has an ``__init__.py``. A directory of scripts (``bench/``,
    ``scripts/``) has none, and its functions are nobody's API. Without a whole tree listing:
    assumed so. Namespace packages (PEP 420) have no ``__init__.py`` and are left out too."""
    if tree is None or tree.truncated:
        return True
    parts = PurePosixPath(path).parts[:-1]
    start = 1 if parts and parts[0] == "src" else 0
    for depth in range(start + 1, len(parts) + 1):
        package = "/".join(parts[:depth])
        if f"{package}/__init__.py" not in tree.files and f"{package}/__init__.pyi" not in tree.files:
            return False
    return True


@dataclass(slots=True)
class ApiChange:
    """What changed in one public object."""

    name: str  # relative to the module: "Client.send"
    kind: str  # "function", "method", "class"
    changes: list[str] = field(default_factory=list)
    lines: tuple[int, int] | None = None  # the object's head lines; None: it is gone


def _visit(path: str, text: str) -> griffe.Module | None:
    try:
        with warnings.catch_warnings():  # an invalid escape in the PR's code is not ours to print
            warnings.simplefilter("ignore", SyntaxWarning)
            return griffe.Visitor(module_name(path), Path(path), text, griffe.Extensions()).get_module()
    except (SyntaxError, ValueError):  # the syntax check reports it; nothing to compare
        return None


def _kind(obj: griffe.Object | griffe.Alias) -> str:
    if obj.is_class:
        return "class"
    if obj.is_function:
        return "method" if obj.parent is not None and obj.parent.is_class else "function"
    return "attribute"


def _lines(obj: griffe.Object | griffe.Alias | None) -> tuple[int, int] | None:
    if obj is None or obj.lineno is None:
        return None
    return obj.lineno, obj.endlineno or obj.lineno


def _walk(base: griffe.Object, head: griffe.Object, prefix: str, out: dict[str, ApiChange]) -> None:
    """Functions turned async or back (griffe's diff does not say), in objects both sides have."""
    for name, old in base.members.items():
        new = head.members.get(name)
        if new is None or old.is_alias or new.is_alias or not old.is_public:
            continue
        qualified = f"{prefix}{name}"
        if old.is_function and new.is_function:
            was, now = "async" in old.labels, "async" in new.labels
            if was != now:
                change = out.setdefault(qualified, ApiChange(qualified, _kind(new), lines=_lines(new)))
                change.changes.append("is now async: callers must await it" if now else "is no longer async")
        elif isinstance(old, griffe.Class) and isinstance(new, griffe.Class):
            _walk(old, new, f"{qualified}.", out)


def api_changes(path: str, base_text: str, head_text: str) -> list[ApiChange]:
    """The public API changes of one module, grouped per object, in head order (removed objects
    last)."""
    base, head = _visit(path, base_text), _visit(path, head_text)
    if base is None or head is None:
        return []
    prefix = base.path + "."
    out: dict[str, ApiChange] = {}
    renamed: set[tuple[str, str]] = set()  # (object, old parameter name) told as a rename
    successors: set[tuple[str, str]] = set()  # (object, new parameter name) of those renames
    breakages = _breakages(base, head)
    added = griffe.BreakageKind.PARAMETER_ADDED_REQUIRED
    # A new required parameter last: one a rename put in a removed one's place is told as the rename.
    for breakage in sorted(breakages, key=lambda b: b.kind is added):
        obj = breakage.obj
        if obj.is_alias:
            continue  # a re-export: its target is in another module (not followed)
        qualified = obj.path.removeprefix(prefix)
        kind = breakage.kind
        if kind is griffe.BreakageKind.OBJECT_REMOVED:
            if not (obj.is_function or obj.is_class):
                continue  # constants and imports come and go
            out.setdefault(qualified, ApiChange(qualified, _kind(obj))).changes.append(
                "was removed or renamed"
            )
            continue
        if not obj.is_function:
            continue
        change = out.setdefault(qualified, ApiChange(qualified, _kind(obj), lines=_lines(obj)))
        if kind is griffe.BreakageKind.PARAMETER_REMOVED:
            old = breakage.old_value
            stars = {griffe.ParameterKind.var_positional: "*", griffe.ParameterKind.var_keyword: "**"}
            shown = f"{stars.get(old.kind, '')}{old.name}"
            successor = _renamed_to(breakage.obj, base, qualified, old.name)
            if successor is not None:
                renamed.add((qualified, old.name))
                successors.add((qualified, successor))
                if not positional_by_convention(old.name):  # ``__name`` was never passed by name
                    change.changes.append(f"parameter {code_span(shown)} renamed to {code_span(successor)}")
            else:
                change.changes.append(f"parameter {code_span(shown)} removed")
        elif kind is griffe.BreakageKind.PARAMETER_MOVED:
            if (qualified, breakage.old_value.name) not in renamed:
                change.changes.append(
                    f"parameter {code_span(breakage.old_value.name)} moved ({breakage.details})"
                )
        elif kind is added:
            name = breakage.new_value.name
            if (qualified, name) not in successors and not _bound(obj, name):
                change.changes.append(f"new required parameter {code_span(name)}: every call must pass it")
        elif kind is griffe.BreakageKind.PARAMETER_CHANGED_DEFAULT:
            old_default, new_default = breakage.old_value.default, breakage.new_value.default
            # ``2 ** 16`` now named ``_READ_CHUNK_SIZE = 2**16`` is the same default
            if not same_value(str(old_default), str(new_default), base, head):
                change.changes.append(
                    f"default of {code_span(breakage.old_value.name)} changed"
                    f" from {code_span(str(old_default))} to {code_span(str(new_default))}"
                )
        if not change.changes:
            del out[qualified]
    _walk(base, head, "", out)
    return sorted(out.values(), key=lambda c: (c.lines is None, c.lines or (0, 0), c.name))


def _constant(module: griffe.Module, expression: str) -> str:
    """``expression`` with a module-level constant it names replaced by its value (once)."""
    member = module.members.get(expression.strip())
    value = getattr(member, "value", None) if member is not None and not member.is_alias else None
    return str(value) if value is not None and member is not None and member.is_attribute else expression


def same_value(old: str, new: str, base: griffe.Module, head: griffe.Module) -> bool:
    """Whether two default expressions are the same value written another way: a constant of
    the module in place of its value (or back), spacing aside."""

    def plain(text: str) -> str:
        return re.sub(r"\s+", "", text)

    return plain(_constant(base, old)) == plain(_constant(head, new))


def positional_by_convention(name: str) -> bool:
    """A parameter named ``__name`` is positional-only by the convention before ``/`` existed
    (PEP 484): renaming it (to ``name, /``, in a "drop Python 3.7" change) breaks no call."""
    return name.startswith("__") and not name.endswith("__")


def _bound(function: griffe.Object | griffe.Alias, name: str) -> bool:
    """Whether ``name`` is the first parameter of a method that Python binds (``self`` of a
    method, ``cls`` of a classmethod: a static method turned classmethod gains no argument)."""
    if not isinstance(function, griffe.Function) or function.parent is None or not function.parent.is_class:
        return False
    parameters = list(function.parameters)
    return bool(parameters) and parameters[0].name == name and "staticmethod" not in function.labels


def _breakages(base: griffe.Module, head: griffe.Module) -> list[griffe.Breakage]:
    """griffe's breaking changes; none when a re-export it tries to follow leads outside the one
    module it was given."""
    try:
        return list(griffe.find_breaking_changes(base, head))
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return []


def _renamed_to(new_function: griffe.Object, base: griffe.Module, qualified: str, name: str) -> str | None:
    """The head parameter at the removed one's position, when the base had no parameter of its
    name (a rename, as a caller passing it by keyword sees it)."""
    old_function = base.get_member(qualified)
    if not isinstance(old_function, griffe.Function) or not isinstance(new_function, griffe.Function):
        return None
    old_names = [p.name for p in old_function.parameters]
    new_params = list(new_function.parameters)
    index = old_names.index(name)
    if index >= len(new_params) or new_params[index].name in old_names:
        return None
    variadic = (griffe.ParameterKind.var_positional, griffe.ParameterKind.var_keyword)
    if old_function.parameters[index].kind in variadic or new_params[index].kind in variadic:
        return None  # `*args`/`**kwargs` gone and a named parameter in its place is no rename
    return str(new_params[index].name)


def api_findings(
    path: str,
    base_text: str,
    head_text: str,
    added: Collection[int],
    *,
    defined_elsewhere: Collection[str] = (),
) -> list[tuple[str, Finding]]:
    """(object, finding): one concern per changed public object, on its first added line when it
    has one, else in the review body. An object removed here whose name the pull request defines
    in another of its files (``defined_elsewhere``) moved, and is not reported."""
    findings = []
    for change in api_changes(path, base_text, head_text):
        if change.lines is None and change.name.rsplit(".", 1)[-1] in defined_elsewhere:
            continue
        anchor = None
        if change.lines is not None:
            first, last = change.lines
            anchor = next((n for n in sorted(added) if first <= n <= last), None)
        label = (
            code_span(f"{change.name}()")
            if change.kind in ("function", "method")
            else f"class {code_span(change.name)}"
        )
        message = (
            f"Public API of {code_span(module_name(path))}: {label} {'; '.join(change.changes)}. "
            "Do its callers (in this repository and outside) and the changelog know?"
        )
        flagged = finding(
            path,
            anchor or (change.lines[0] if change.lines else 1),
            Severity.CONCERN,
            RULE,
            message,
            f"{change.name}\n" + "\n".join(change.changes),
            inline=anchor is not None,
        )
        findings.append((f"{module_name(path)}.{change.name}", flagged))
    return findings


_DEFINITION = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)", re.MULTILINE)


def defined_names(text: str) -> set[str]:
    """The functions and classes a module text defines, at any depth (a quick scan, not a parse)."""
    return set(_DEFINITION.findall(text))


def capped(findings: Sequence[tuple[str, Finding]], limit: int = MAX_FINDINGS) -> list[Finding]:
    """At most ``limit`` findings; the rest named in one more, in the review body (a refactor
    that reshapes dozens of objects gets one sentence about them, not dozens of comments)."""
    kept = [f for _, f in findings[:limit]]
    rest = findings[limit:]
    if not rest:
        return kept
    names = [name for name, _ in rest]
    shown = ", ".join(code_span(name) for name in names[:8]) + (", ..." if len(names) > 8 else "")
    summary = finding(
        rest[0][1].path,
        1,
        Severity.CONCERN,
        RULE,
        f"{len(rest)} more public API changes ({shown}). Do their callers and the changelog know?",
        "\n".join(sorted(names)),
        inline=False,
    )
    return [*kept, summary]


def _major_of(version: object) -> int | None:
    match = _MAJOR.match(version) if isinstance(version, str) else None
    return int(match.group(1)) if match else None


def package_major(configs: Mapping[str, FileContent | None], modules: Iterable[str]) -> int | None:
    """The major version the package declares at the base: ``pyproject.toml``'s ``[project]`` (or
    ``[tool.poetry]``) ``version``, ``setup.cfg``'s ``[metadata] version``, else a literal
    ``__version__`` in one of ``modules`` (texts); None when it says none (a dynamic version)."""
    pyproject = configs.get("pyproject.toml")
    if pyproject is not None and pyproject.text is not None:
        try:
            document = load_toml(pyproject.text)
        except TOMLDecodeError:
            document = {}
        tool = document.get("tool")
        for table in (document.get("project"), tool.get("poetry") if isinstance(tool, dict) else None):
            major = _major_of(table.get("version")) if isinstance(table, dict) else None
            if major is not None:
                return major
    setup = configs.get("setup.cfg")
    if setup is not None and setup.text is not None and "[metadata]" in setup.text:
        parser = configparser.RawConfigParser(strict=False)
        with contextlib.suppress(configparser.Error):
            parser.read_string(setup.text)
            major = _major_of(parser.get("metadata", "version", fallback=None))
            if major is not None:
                return major
    for text in modules:
        match = _DUNDER_VERSION.search(text)
        if match:
            return int(match.group(1))
    return None


def version_paths(modules: Sequence[str]) -> list[str]:
    """Where a package says its version, for these modules' top-level packages (``pkg/`` or
    ``src/pkg/``): its ``__init__.py`` and the usual version modules, and ``setup.py``."""
    packages: dict[str, None] = {}
    for path in modules:
        parts = path.split("/")
        depth = 2 if parts[0] == "src" and len(parts) > 2 else 1
        if len(parts) > depth:
            packages["/".join(parts[:depth])] = None
    names = ("__init__.py", "__version__.py", "_version.py", "version.py")
    return [*(f"{package}/{name}" for package in packages for name in names), "setup.py"]


def initial_development(batch: AnalysisInput) -> bool:
    """Whether the package is at 0.x at the base, where its public API is not yet a promise: a
    version file the pull request changed is read as the base has it, one it adds not at all."""
    modules = [item.path for item in batch.files if item.file.status in BASE_STATUSES]
    status = {item.path: item.file.status for item in batch.files}
    texts = []
    for path in version_paths(modules):
        if status.get(path) == "added":
            continue
        content = batch.base.get(path) if path in status else batch.contents.get(path)
        if content is not None and content.text is not None:
            texts.append(content.text)
    return package_major(batch.configs, texts) == 0


class ApiBreakAnalyzer:
    """Implements ``analyzers.Analyzer``; needs the base side of the files (``batch.base``)."""

    name = "api"
    tools: tuple[str, ...] = ()
    differential: bool = False
    rules: tuple[Rule, ...] = (
        Rule(
            RULE,
            Severity.CONCERN,
            "a public function, method or class removed or renamed, a parameter removed, renamed or "
            "reordered, a new required parameter, a default changed, sync turned async or back "
            "(griffe, static; never imported)",
        ),
    )

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        modules = [f.path for f in files if f.status in BASE_STATUSES and is_public_module(f.path)]
        return [*modules, *version_paths(modules)] if modules else []

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        output = AnalyzerOutput()
        compared = 0
        found: list[tuple[str, Finding]] = []
        defined: dict[str, set[str]] = {
            item.path: defined_names(item.text) for item in batch.files if is_python(item.path) and item.text
        }
        for item in batch.files:
            if item.file.status not in BASE_STATUSES or not is_public_module(item.path):
                continue
            if not in_a_package(item.path, batch.tree):
                continue
            base = batch.base.get(item.file.previous_path or item.path)
            if item.text is None or base is None or base.text is None:
                continue
            compared += 1
            elsewhere = {name for path, names in defined.items() if path != item.path for name in names}
            try:
                found += api_findings(
                    item.path, base.text, item.text, item.lines.added, defined_elsewhere=elsewhere
                )
            except EXHAUSTED as exc:  # too deep for Python's own parser: a refused file, said so
                output.incomplete = True
                output.skipped.append(
                    Skipped(
                        item.path, f"API checks not run: it nests too deeply to parse ({type(exc).__name__})"
                    )
                )
        kept = capped(found)
        if kept and initial_development(batch):  # 0.x: anything may change (SemVer's item 4)
            kept = [replace(f, severity=Severity.NIT) for f in kept]
        output.findings.extend(kept)
        if compared:
            output.notes.append(
                f"public API compared with the base in {compared} module{'s' if compared != 1 else ''}"
            )
        return output
