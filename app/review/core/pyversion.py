"""The Python a change declares. Pure; runs inside the execution boundary, on text the pull
request wrote.

A pull request that drops an old Python ("Drop Python 3.8") raises ``requires-python`` or
ruff's ``target-version`` and modernises the syntax in the same change: a parenthesised
``with``, a ``match``. Judged with the base's declaration, that code is a syntax error it is
not. So where the pull request changes a configuration file ruff reads, the version settings
its head declares replace the base's, and nothing else does: every rule still comes from the
base. Ruff's own precedence decides which one counts (``target-version``, else the
``requires-python`` of the ``pyproject.toml``), as the repository's own ruff would read the head.

This never lets code through that does not parse for the versions the head declares: ruff
judges the syntax against them. And the change itself is a concern (``VersionChange``): a pull
request that changes the Python it supports is not approved without a person reading it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from .model import FileContent
from .refusals import TOMLDecodeError, load_toml
from .ruffinputs import RuffInput

__all__ = ["VersionChange", "declared_minimum", "head_declared"]

_TARGET = re.compile(r"py3(\d{1,2})")
MAX_MINOR = 30  # 3.30 is far enough


@dataclass(frozen=True, slots=True)
class VersionChange:
    """A configuration file whose head declares another minimum Python than its base."""

    path: str
    line: int  # the head line that declares it (1 when it cannot be told)
    before: tuple[int, int] | None
    after: tuple[int, int] | None

    @property
    def message(self) -> str:
        def shown(version: tuple[int, int] | None) -> str:
            return "unstated" if version is None else f"{version[0]}.{version[1]}"

        if self.before is not None and self.after is not None:
            verb = "raises" if self.after > self.before else "lowers"
            return (
                f"This change {verb} the minimum Python from {shown(self.before)} to {shown(self.after)}: "
                "its code is checked against the new one. Do the CI matrix, the classifiers and the "
                "changelog say the same?"
            )
        return (
            f"This change makes the declared minimum Python {shown(self.after)}"
            f" (it was {shown(self.before)}): "
            "its code is checked against it."
        )


def _minimum_of(requires: str) -> tuple[int, int] | None:
    """The lowest 3.x a ``requires-python`` specifier allows (None: none, or not a specifier)."""
    try:
        spec = SpecifierSet(requires)
    except InvalidSpecifier:
        return None
    for minor in range(MAX_MINOR + 1):
        if any(spec.contains(f"3.{minor}.{patch}", prereleases=True) for patch in (0, 1, 50)):
            return (3, minor)
    return None


def declared_minimum(ruff: Mapping[str, Any] | None, requires_python: str | None) -> tuple[int, int] | None:
    """The minimum Python as ruff reads it: its ``target-version``, else ``requires-python``."""
    target = (ruff or {}).get("target-version")
    if isinstance(target, str):
        match = _TARGET.fullmatch(target)
        if match:
            return (3, int(match.group(1)))
    return _minimum_of(requires_python) if requires_python is not None else None


def _declaration(path: str, text: str) -> tuple[Any, str | None]:
    """The head's ``target-version`` and ``requires-python`` of one configuration file."""
    document = load_toml(text)
    if PurePosixPath(path).name == "pyproject.toml":
        tool = document.get("tool")
        ruff = tool.get("ruff") if isinstance(tool, dict) else None
        project = document.get("project")
        requires = project.get("requires-python") if isinstance(project, dict) else None
    else:  # ruff.toml, .ruff.toml
        ruff, requires = document, None
    target = ruff.get("target-version") if isinstance(ruff, dict) else None
    return target, requires if isinstance(requires, str) else None


def _line_of(text: str, *names: str) -> int:
    for number, row in enumerate(text.splitlines(), 1):
        if any(row.lstrip().startswith(name) for name in names):
            return number
    return 1


def head_declared(
    inputs: list[RuffInput],
    head: Mapping[str, FileContent | None],
    changed: Collection[str],
) -> tuple[list[RuffInput], list[VersionChange]]:
    """``inputs`` (the base's, re-written) with the version settings of the head of each file the
    pull request ``changed``; and each change of the declared minimum. A head file that does not
    read as TOML changes nothing (the configuration analyzer says so)."""
    out: list[RuffInput] = []
    changes: list[VersionChange] = []
    for item in inputs:
        content = head.get(item.path) if item.path in changed else None
        if content is None or content.text is None:
            out.append(item)
            continue
        try:
            target, requires = _declaration(item.path, content.text)
        except TOMLDecodeError:
            out.append(item)
            continue
        settings = None
        if item.settings is not None:  # only a ruff configuration at the base has its version set
            settings = {k: v for k, v in item.settings.items() if k != "target-version"}
            if isinstance(target, str):
                settings["target-version"] = target
        updated = replace(item, settings=settings, requires_python=requires)
        before = declared_minimum(item.settings, item.requires_python)
        after = declared_minimum(updated.settings, updated.requires_python)
        if before != after:
            line = _line_of(content.text, "target-version", "requires-python")
            changes.append(VersionChange(item.path, line, before, after))
        out.append(updated)
    return out, changes
