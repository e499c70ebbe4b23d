"""Which files the workflow, shell and Dockerfile linters review, and their configuration as the
repository wrote it, re-written so that nothing in it reaches outside the tree. Pure; the
re-writing runs inside the execution boundary, like ``ruffinputs.ruff_inputs``.

- ``zizmor.yml`` (or ``.github/zizmor.yml``): its ``rules`` (per audit: ``ignore``, ``disable``,
  ``config``), read with the bounded YAML loader (``patterns.load_yaml``), written back as plain
  YAML; nothing else of it is kept.
- ``.shellcheckrc`` (the nearest one on a script's path, as shellcheck looks for it): its
  ``enable``/``disable``/``shell``/``extended-analysis`` lines, and ``source-path`` only where it
  stays inside the tree. ``external-sources`` is dropped: shellcheck then opens no file that is
  not one of the pull request's own scripts (a ``# shellcheck source=/etc/...`` line included).
- ``.hadolint.yaml``: ``ignored``, ``override``, ``trustedRegistries``, ``label-schema``,
  ``strict-labels``, ``disable-ignore-pragma``; the output and exit-code settings are ours.

``config_paths`` (``lintconfig``) lists these files among the lint configuration it reads, so
they are read the way ruff's are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml

from .codespan import code_span
from .model import FileContent
from .patterns import YamlRefused, load_yaml
from .selection import inside_tree

__all__ = [
    "HADOLINT_CONFIGS",
    "SHELLCHECKRC",
    "ZIZMOR_CONFIGS",
    "ToolConfig",
    "hadolint_config",
    "is_dockerfile",
    "is_shell_candidate",
    "is_shell_path",
    "is_workflow",
    "looks_like_shell",
    "shellcheck_configs",
    "tool_config_paths",
    "zizmor_config",
]

ZIZMOR_CONFIGS = ("zizmor.yml", "zizmor.yaml", ".github/zizmor.yml", ".github/zizmor.yaml")
HADOLINT_CONFIGS = (".hadolint.yaml", ".hadolint.yml")
SHELLCHECKRC = ".shellcheckrc"
_WORKFLOW = re.compile(r"^\.github/workflows/[^/]+\.ya?ml$")
_ACTION = re.compile(r"(?:^|/)action\.ya?ml$")
_SHEBANG = re.compile(r"#![ \t]*(?:/usr)?/bin/(?:env[ \t]+(?:-S[ \t]+)?)?(?:ba|da|k|z)?sh\b")
_SHELLCHECK_KEYS = frozenset({"enable", "disable", "shell", "extended-analysis", "source-path"})
_ZIZMOR_RULE_KEYS = frozenset({"ignore", "disable", "config"})
_HADOLINT_KEYS = frozenset(
    {"ignored", "override", "trustedRegistries", "label-schema", "strict-labels", "disable-ignore-pragma"}
)
_NOT_SCRIPTS = frozenset({"Makefile", "LICENSE", "CODEOWNERS", "Procfile", "Gemfile", "Pipfile", "AUTHORS"})


def is_workflow(path: str) -> bool:
    """A GitHub Actions workflow, or an action's definition (a composite action's ``action.yml``)."""
    return _WORKFLOW.match(path) is not None or _ACTION.search(path) is not None


def is_dockerfile(path: str) -> bool:
    """``Dockerfile``, ``Dockerfile.dev``, ``Containerfile``, ``dev.Dockerfile`` (any case of its
    suffix); not the ignore file BuildKit reads beside one (``Dockerfile.dockerignore``)."""
    name = PurePosixPath(path).name
    if name.lower().endswith(".dockerignore"):
        return False
    return name.startswith(("Dockerfile", "Containerfile")) or name.lower().endswith(".dockerfile")


def is_shell_path(path: str) -> bool:
    return path.endswith((".sh", ".bash"))


def is_shell_candidate(path: str) -> bool:
    """A shell script by its name, or a file without a suffix that may be one (its shebang says)."""
    name = PurePosixPath(path).name
    if is_shell_path(path):
        return True
    return "." not in name and name not in _NOT_SCRIPTS and not is_dockerfile(path)


def looks_like_shell(path: str, text: str) -> bool:
    return is_shell_path(path) or _SHEBANG.match(text) is not None


def tool_config_paths(paths: Iterable[str]) -> list[str]:
    """The linters' configuration files these analysed paths may be governed by."""
    wanted: dict[str, None] = {}
    for path in paths:
        if is_workflow(path):
            wanted.update(dict.fromkeys(ZIZMOR_CONFIGS))
        if is_dockerfile(path):
            wanted.update(dict.fromkeys(HADOLINT_CONFIGS))
        if is_shell_candidate(path):
            parts = path.split("/")[:-1]
            for depth in range(len(parts) + 1):
                directory = "/".join(parts[:depth])
                wanted[f"{directory}/{SHELLCHECKRC}" if directory else SHELLCHECKRC] = None
    return list(wanted)


@dataclass(frozen=True, slots=True)
class ToolConfig:
    """A linter's configuration, re-written: the files to write into its tree (repository path
    -> text), which of them the repository wrote (``used``), and what was dropped or refused."""

    files: Mapping[str, str] = field(default_factory=dict)
    used: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _first_yaml(
    contents: Mapping[str, FileContent | None], paths: Iterable[str]
) -> tuple[str, dict[str, Any] | None, str | None] | None:
    """The first of ``paths`` the repository has: its path, its mapping (None: not usable) and
    why not; None when it has none of them."""
    for path in paths:
        content = contents.get(path)
        if content is None or content.text is None:
            continue
        try:
            data = load_yaml(content.text)
        except YamlRefused as exc:
            return path, None, f"{code_span(path)} was not read ({exc}); the linter's defaults were used"
        except yaml.YAMLError:
            return path, None, f"{code_span(path)} is not valid YAML; the linter's defaults were used"
        if data is None:
            return path, {}, None
        if not isinstance(data, dict):
            return path, None, f"{code_span(path)} is not a mapping; the linter's defaults were used"
        return path, data, None
    return None


def _plain(value: Any) -> bool:
    """Plain data: strings, numbers, booleans, and lists and string-keyed maps of them."""
    if isinstance(value, str | int | float | bool) or value is None:
        return True
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def zizmor_config(contents: Mapping[str, FileContent | None]) -> ToolConfig:
    """The repository's zizmor configuration (the first of ``ZIZMOR_CONFIGS`` it has), its
    ``rules`` kept; none: zizmor runs with no configuration at all."""
    found = _first_yaml(contents, ZIZMOR_CONFIGS)
    if found is None:
        return ToolConfig()
    path, data, problem = found
    if data is None:
        return ToolConfig(notes=(problem or "",))
    rules = data.get("rules")
    kept = {
        audit: {k: v for k, v in settings.items() if k in _ZIZMOR_RULE_KEYS and _plain(v)}
        for audit, settings in (rules.items() if isinstance(rules, dict) else ())
        if isinstance(audit, str) and isinstance(settings, dict)
    }
    return ToolConfig({path: yaml.safe_dump({"rules": kept}, sort_keys=True)}, (path,))


def hadolint_config(contents: Mapping[str, FileContent | None]) -> ToolConfig:
    """The repository's hadolint configuration, its rule settings kept; always a file (empty
    when the repository has none), so hadolint reads no configuration of the host."""
    found = _first_yaml(contents, HADOLINT_CONFIGS)
    if found is None:
        return ToolConfig({HADOLINT_CONFIGS[0]: "{}\n"})
    path, data, problem = found
    if data is None:
        return ToolConfig({HADOLINT_CONFIGS[0]: "{}\n"}, notes=(problem or "",))
    kept = {k: v for k, v in data.items() if k in _HADOLINT_KEYS and _plain(v)}
    return ToolConfig({HADOLINT_CONFIGS[0]: yaml.safe_dump(kept, sort_keys=True)}, (path,))


def _shellcheckrc(path: str, text: str) -> tuple[str, list[str]]:
    directory = str(PurePosixPath(path).parent)
    directory = "" if directory == "." else directory
    kept: list[str] = []
    notes: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = (part.strip() for part in line.split("=", 1))
        if key == "external-sources":
            notes.append(
                f"{code_span(path)}: `external-sources` was dropped"
                " (files outside the pull request are not read)"
            )
            continue
        if key not in _SHELLCHECK_KEYS:
            continue
        if key == "source-path":
            relative = value.removeprefix("SCRIPTDIR").lstrip("/") if value.startswith("SCRIPTDIR") else value
            if relative and inside_tree(directory, relative) is None:
                notes.append(
                    f"{code_span(path)}: the `source-path` {code_span(str(value))} names a path outside"
                    " the repository; it was dropped"
                )
                continue
        kept.append(f"{key}={value}")
    return "".join(f"{line}\n" for line in kept), notes


def shellcheck_configs(contents: Mapping[str, FileContent | None]) -> ToolConfig:
    """Every ``.shellcheckrc`` read, re-written at its path; one at the root always (empty when
    the repository has none), so shellcheck's search for one ends inside the tree."""
    files: dict[str, str] = {}
    notes: list[str] = []
    used: list[str] = []
    for path in sorted(contents):
        content = contents.get(path)
        text = None if content is None else content.text
        if PurePosixPath(path).name != SHELLCHECKRC or text is None:
            continue
        files[path], dropped = _shellcheckrc(path, text)
        notes += dropped
        used.append(path)
    files.setdefault(SHELLCHECKRC, "")
    return ToolConfig(files, tuple(used), tuple(notes))
