"""The ruff configurations as ruff will read them: re-written inside the execution boundary from
what the repository's files say (``lintconfig``), never the pull request's text. Pure.

Every path-valued setting (``extend``, ``src``, ...) is kept only where it resolves inside the
repository's tree, and each one dropped is named with its file and setting.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any

import tomli_w

from .codespan import code_span
from .lintconfig import LintConfig, RuffConfigFile
from .model import FileContent
from .refusals import load_toml
from .selection import inside_tree

__all__ = ["RuffInput", "ruff_inputs"]

# Ruff settings that name a file or directory ruff reads or writes; each must stay inside the
# repository (``cache-dir`` and ``output-file`` never: ruff runs with --no-cache, its output is ours).
PATH_SETTINGS = ("extend", "src", "namespace-packages")
NEVER_SETTINGS = ("cache-dir", "output-file")


@dataclass(frozen=True, slots=True)
class RuffInput:
    """A configuration file as ruff will read it: only what ruff reads from it (its ruff table,
    a ``pyproject.toml``'s ``requires-python``), re-written, never the pull request's text."""

    path: str
    settings: Mapping[str, Any] | None  # None: a pyproject.toml without [tool.ruff]
    requires_python: str | None = None

    def without(self, name: str) -> RuffInput:
        """Without the setting ``name``, at the top or in a sub-table (``[lint]``)."""

        def drop(table: Mapping[str, Any]) -> dict[str, Any]:
            return {k: drop(v) if isinstance(v, dict) else v for k, v in table.items() if k != name}

        return replace(self, settings=None if self.settings is None else drop(self.settings))

    @property
    def text(self) -> str:
        if PurePosixPath(self.path).name != "pyproject.toml":
            return tomli_w.dumps(dict(self.settings or {}))
        document: dict[str, Any] = {}
        if self.requires_python is not None:
            document["project"] = {"requires-python": self.requires_python}
        if self.settings is not None:
            document["tool"] = {"ruff": dict(self.settings)}
        return tomli_w.dumps(document)


def _checked_settings(
    config: RuffConfigFile, known: Mapping[str, RuffConfigFile]
) -> tuple[dict[str, Any], list[str]]:
    """The ruff table without the path settings that leave the repository; the notes for them."""
    table = dict(config.table)
    notes: list[str] = []

    def dropped(name: str, why: str) -> None:
        notes.append(f"{code_span(config.path)}: the ruff setting {code_span(name)} {why}; it was dropped")

    for name in NEVER_SETTINGS:
        if table.pop(name, None) is not None:
            dropped(name, "is not used by revbot")
    extend = table.get("extend")
    if extend is not None:
        target = inside_tree(config.directory, extend) if isinstance(extend, str) else None
        if target is None or target not in known:
            del table["extend"]
            dropped("extend", "does not name a configuration file inside the repository")
    for name in PATH_SETTINGS[1:]:
        value = table.get(name)
        if value is None:
            continue
        entries = value if isinstance(value, list) else [value]
        kept = [e for e in entries if isinstance(e, str) and inside_tree(config.directory, e) is not None]
        if len(kept) != len(entries):
            dropped(name, "names a path outside the repository")
            table[name] = kept
    return table, notes


def ruff_inputs(
    config: LintConfig, contents: Mapping[str, FileContent | None]
) -> tuple[list[RuffInput], list[str]]:
    """The files ruff reads (every ruff configuration, and the other ``pyproject.toml`` files on
    the paths for their ``requires-python``), path settings confined to the repository; and a
    note for every setting dropped."""
    inputs: list[RuffInput] = []
    notes: list[str] = []
    for path in sorted(
        set(config.ruff_configs) | {p for p in contents if PurePosixPath(p).name == "pyproject.toml"}
    ):
        content = contents.get(path)
        requires: str | None = None
        if PurePosixPath(path).name == "pyproject.toml" and content is not None and content.text is not None:
            try:
                project = load_toml(content.text).get("project")
            except tomllib.TOMLDecodeError:
                continue
            value = project.get("requires-python") if isinstance(project, dict) else None
            requires = value if isinstance(value, str) else None
        governing = config.ruff_configs.get(path)
        if governing is None:
            inputs.append(RuffInput(path, None, requires))
            continue
        table, dropped = _checked_settings(governing, config.ruff_configs)
        notes += dropped
        inputs.append(RuffInput(path, table, requires))
    return inputs, notes
