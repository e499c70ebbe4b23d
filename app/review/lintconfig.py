"""What the repository's own lint configuration says, read from its files at the head commit. Pure.

The bot lints what the repository lints, with the rules it chose, at the version it pinned:

- **Scope.** A path is not linted when the repository says so: ruff's ``exclude``/``extend-exclude``
  in the ruff configuration that governs the file (the nearest ``.ruff.toml``/``ruff.toml``/
  ``pyproject.toml`` with ``[tool.ruff]`` on its path, following ``extend``); the top-level
  ``exclude`` of ``.pre-commit-config.yaml``, or the ``exclude`` of every lint hook it runs (ruff,
  flake8, pyflakes, pylint) when each of them leaves the file out; and, when no ruff configuration
  governs the file, the formatter's ``[tool.black] exclude``/``extend-exclude``. (Pre-commit's
  ``files`` patterns count the same way: a path they do not match is left out.)
- **Configs.** Every ruff configuration file on an analysed file's path, so ruff resolves them the
  way it does in a checkout (``config_paths`` lists what to read; ``extend`` targets inside the
  repository are read in a second round, ``missing_extends``).
- **Pin.** The ruff version the repository pins (pre-commit ``rev``, or ``ruff==X`` in a dev
  dependency list), so rules newer than it are not reported.

Pre-commit patterns are Python regular expressions searched in the path; ruff's are globs relative
to the directory of the configuration file that holds them; black's is a regular expression searched
in ``/`` + the path.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml

from .model import FileContent, RepoTree
from .selection import glob_match

__all__ = [
    "PRE_COMMIT",
    "RUFF_CONFIGS",
    "Exclusion",
    "HookScope",
    "LintConfig",
    "RuffConfigFile",
    "RuffPin",
    "config_paths",
    "lint_config",
    "missing_extends",
    "version_tuple",
]

PRE_COMMIT = ".pre-commit-config.yaml"
# In ruff's own order of precedence within one directory.
RUFF_CONFIGS = (".ruff.toml", "ruff.toml", "pyproject.toml")
LINT_HOOKS = frozenset({"ruff", "ruff-check", "flake8", "pyflakes", "pylint"})
RUFF_HOOK_REPOS = ("astral-sh/ruff-pre-commit", "charliermarsh/ruff-pre-commit")
REQUIREMENT_FILES = re.compile(r"^(?:requirements[^/]*|[^/]*requirements|requirements/[^/]+)\.(?:txt|in)$")
_VERSION = re.compile(r"v?(\d+(?:\.\d+)*)")
_RUFF_REQUIREMENT = re.compile(r"""(?im)(?:^|["'\s,\[])ruff\s*(?:\[[^\]]*\])?\s*===?\s*v?(\d+(?:\.\d+)+)""")
_FROZEN = re.compile(r"#\s*frozen:\s*v?(\d+(?:\.\d+)+)")
MAX_EXTEND_DEPTH = 3


def version_tuple(text: str) -> tuple[int, ...] | None:
    """``"v0.4.1"`` -> ``(0, 4, 1)``; None when it is not a version."""
    match = _VERSION.fullmatch(text.strip())
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


@dataclass(frozen=True, slots=True)
class Exclusion:
    source: str  # the file that says so
    pattern: str

    @property
    def reason(self) -> str:
        pattern = " ".join(self.pattern.split())
        pattern = pattern if len(pattern) <= 60 else pattern[:57] + "..."
        return f"not linted: excluded by the repository's config (`{self.source}`: `{pattern}`)"


@dataclass(frozen=True, slots=True)
class HookScope:
    """The paths pre-commit hands a hook (at the top level: every hook): those ``files`` matches
    (every path when unset), minus those ``exclude`` matches."""

    exclude: str | None = None
    files: str | None = None

    def leaves_out(self, path: str) -> Exclusion | None:
        if self.exclude and _search(self.exclude, path):
            return Exclusion(PRE_COMMIT, self.exclude)
        if self.files and not _search(self.files, path):
            return Exclusion(PRE_COMMIT, f"files: {self.files}")
        return None

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> HookScope:
        def pattern(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) and value.strip() else None

        return cls(pattern("exclude"), pattern("files"))


@dataclass(frozen=True, slots=True)
class RuffConfigFile:
    path: str  # repository path of the file
    text: str
    table: Mapping[str, Any]  # the ruff settings (``[tool.ruff]`` of a pyproject.toml)

    @property
    def directory(self) -> str:
        parent = str(PurePosixPath(self.path).parent)
        return "" if parent == "." else parent


@dataclass(frozen=True, slots=True)
class RuffPin:
    version: tuple[int, ...]
    source: str

    @property
    def label(self) -> str:
        return ".".join(str(part) for part in self.version)


@dataclass(frozen=True, slots=True)
class LintConfig:
    ruff_configs: Mapping[str, RuffConfigFile] = field(default_factory=dict)  # by path
    problems: tuple[str, ...] = ()  # configuration files that could not be used, and why
    pre_commit: HookScope | None = None  # the top level: applies to every hook
    lint_hooks: tuple[HookScope, ...] = ()  # one per lint hook
    black_excludes: tuple[Exclusion, ...] = ()
    pin: RuffPin | None = None

    def governing(self, path: str) -> RuffConfigFile | None:
        """The ruff configuration ruff would use for ``path``: the nearest one on its path."""
        parts = path.split("/")[:-1]
        for depth in range(len(parts), -1, -1):
            directory = "/".join(parts[:depth])
            for name in RUFF_CONFIGS:
                found = self.ruff_configs.get(f"{directory}/{name}" if directory else name)
                if found is not None:
                    return found
        return None

    def excluded(self, path: str) -> Exclusion | None:
        """Why the repository does not lint ``path``, or None when it does."""
        top = self.pre_commit.leaves_out(path) if self.pre_commit is not None else None
        if top is not None:
            return top
        hooks = [hook.leaves_out(path) for hook in self.lint_hooks]
        if hooks and all(hooks):
            return hooks[0]
        governing = self.governing(path)
        if governing is not None:
            return self._ruff_exclusion(governing, path)
        for exclusion in self.black_excludes:
            if _search(exclusion.pattern, "/" + path, verbose="\n" in exclusion.pattern):
                return exclusion
        return None

    def _ruff_exclusion(self, config: RuffConfigFile, path: str) -> Exclusion | None:
        for source, base, pattern in self._ruff_patterns(config, 0):
            if "/" in pattern.strip().rstrip("/"):  # anchored at the directory of the file that says so
                if base and not path.startswith(base + "/"):
                    continue
                relative = path[len(base) + 1 :] if base else path
            else:
                relative = path  # a bare name matches at any depth
            if ruff_glob_match(pattern, relative):
                return Exclusion(source, pattern)
        return None

    def _ruff_patterns(self, config: RuffConfigFile, depth: int) -> list[tuple[str, str, str]]:
        """(source file, its directory, pattern) for ``exclude`` and ``extend-exclude``, the
        extended configuration's first (its ``exclude`` is replaced by ours when we set one)."""
        inherited: list[tuple[str, str, str]] = []
        target = _extend_target(config)
        if target is not None and depth < MAX_EXTEND_DEPTH and target in self.ruff_configs:
            inherited = self._ruff_patterns(self.ruff_configs[target], depth + 1)
        own = config.table
        patterns = inherited
        if isinstance(own.get("exclude"), list):
            patterns = [p for p in inherited if p[2] not in _exclude_of(self.ruff_configs, target)]
            patterns += [(config.path, config.directory, str(p)) for p in own["exclude"]]
        if isinstance(own.get("extend-exclude"), list):
            patterns += [(config.path, config.directory, str(p)) for p in own["extend-exclude"]]
        return patterns

    @property
    def ruff_config_used(self) -> bool:
        return bool(self.ruff_configs)


def _exclude_of(configs: Mapping[str, RuffConfigFile], path: str | None) -> set[str]:
    config = configs.get(path) if path else None
    value = config.table.get("exclude") if config is not None else None
    return {str(p) for p in value} if isinstance(value, list) else set()


def ruff_glob_match(pattern: str, path: str) -> bool:
    """Ruff's reading of an exclude pattern: a bare name (``.venv``, ``foo_*.py``) matches a file or
    directory of that name anywhere; one with a ``/`` is anchored at the configuration's directory;
    excluding a directory excludes what is below it."""
    cleaned = pattern.strip().removeprefix("./")
    if not cleaned:
        return False
    anchored = "/" in cleaned.rstrip("/")
    return glob_match("/" + cleaned if anchored and not cleaned.startswith("/") else cleaned, path)


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str, verbose: bool) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern, re.VERBOSE if verbose else 0)
    except re.error:
        return None


def _search(pattern: str, path: str, *, verbose: bool = False) -> bool:
    compiled = _compiled(pattern, verbose)
    return compiled is not None and compiled.search(path) is not None


def _extend_target(config: RuffConfigFile) -> str | None:
    """The repository path of the file ``extend`` names, when it stays inside the repository."""
    value = config.table.get("extend")
    if not isinstance(value, str) or not value.strip() or value.startswith(("/", "~")):
        return None
    parts: list[str] = [p for p in config.directory.split("/") if p]
    for part in value.strip().split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None  # outside the repository
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts) or None


def config_paths(paths: Iterable[str], tree: RepoTree | None) -> list[str]:
    """The configuration files to read for these analysed paths: the pre-commit config, the
    dev-requirement files at the root, and every ruff configuration candidate on each path
    (only those the tree holds, when the tree is known)."""
    wanted: dict[str, None] = {PRE_COMMIT: None}
    for path in paths:
        parts = path.split("/")[:-1]
        for depth in range(len(parts) + 1):
            directory = "/".join(parts[:depth])
            for name in RUFF_CONFIGS:
                wanted[f"{directory}/{name}" if directory else name] = None
    if tree is not None:
        wanted.update(dict.fromkeys(sorted(p for p in tree.files if REQUIREMENT_FILES.match(p))))
        if not tree.truncated:  # a cut-short listing cannot say a file is absent
            return [p for p in wanted if p in tree.files]
    return list(wanted)


def missing_extends(contents: Mapping[str, FileContent | None]) -> list[str]:
    """``extend`` targets of the ruff configurations read so far that were not read yet."""
    config = lint_config(contents)
    targets = {_extend_target(c) for c in config.ruff_configs.values()}
    return sorted(t for t in targets if t is not None and t not in contents)


def _ruff_table(path: str, text: str) -> tuple[Mapping[str, Any] | None, str | None]:
    name = PurePosixPath(path).name
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        if name == "pyproject.toml" and "[tool.ruff" not in text:
            return None, None
        return None, f"`{path}` is not valid TOML ({exc})"
    if name != "pyproject.toml":
        return data, None
    tool = data.get("tool")
    table = tool.get("ruff") if isinstance(tool, dict) else None
    return (table, None) if isinstance(table, dict) else (None, None)


def _black_excludes(path: str, text: str) -> list[Exclusion]:
    try:
        tool = tomllib.loads(text).get("tool")
    except tomllib.TOMLDecodeError:
        return []
    black = tool.get("black") if isinstance(tool, dict) else None
    if not isinstance(black, dict):
        return []
    return [
        Exclusion(path, black[key])
        for key in ("exclude", "extend-exclude", "force-exclude")
        if isinstance(black.get(key), str) and black[key].strip()
    ]


def _pre_commit(text: str) -> tuple[HookScope | None, list[HookScope], RuffPin | None, str | None]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return None, [], None, f"`{PRE_COMMIT}` is not valid YAML ({' '.join(str(exc).split())[:120]})"
    if not isinstance(data, dict):
        return None, [], None, None
    hooks: list[HookScope] = []
    pin: RuffPin | None = None
    for repo in data.get("repos") or []:
        if not isinstance(repo, dict):
            continue
        url = str(repo.get("repo") or "")
        hooks += [
            HookScope.of(hook)
            for hook in repo.get("hooks") or []
            if isinstance(hook, dict) and str(hook.get("id")) in LINT_HOOKS
        ]
        if any(url.rstrip("/").endswith(name) for name in RUFF_HOOK_REPOS):
            pin = pin or _hook_pin(text, str(repo.get("rev") or ""))
    return HookScope.of(data), hooks, pin, None


def _hook_pin(text: str, rev: str) -> RuffPin | None:
    """The ruff version of a ``rev: v0.4.1``, or of a frozen sha (``rev: <sha>  # frozen: v0.4.1``)."""
    version = version_tuple(rev)
    if version is not None and len(version) > 1:
        return RuffPin(version, PRE_COMMIT)
    for line in text.splitlines():
        if rev and rev in line:
            frozen = _FROZEN.search(line)
            if frozen:
                found = version_tuple(frozen.group(1))
                return RuffPin(found, PRE_COMMIT) if found else None
    return None


def lint_config(contents: Mapping[str, FileContent | None]) -> LintConfig:
    """Everything above, from the configuration files read at the head commit."""
    configs: dict[str, RuffConfigFile] = {}
    problems: list[str] = []
    black: list[Exclusion] = []
    pin: RuffPin | None = None
    for path in sorted(contents):
        content = contents[path]
        name = PurePosixPath(path).name
        if content is None or content.text is None:
            continue
        if name in RUFF_CONFIGS:
            table, problem = _ruff_table(path, content.text)
            if problem is not None:
                problems.append(problem)
            elif table is not None:
                configs[path] = RuffConfigFile(path, content.text, table)
            if path == "pyproject.toml":
                black = _black_excludes(path, content.text)
        if (path == "pyproject.toml" or REQUIREMENT_FILES.match(path)) and pin is None:
            requirement = _RUFF_REQUIREMENT.search(content.text)
            version = version_tuple(requirement.group(1)) if requirement else None
            pin = RuffPin(version, path) if version else None
    for _ in range(MAX_EXTEND_DEPTH):  # the files ``extend`` names, whatever they are called
        targets = {_extend_target(c) for c in configs.values()} - set(configs) - {None}
        added = False
        for target in sorted(t for t in targets if t is not None):
            content = contents.get(target)
            if content is None or content.text is None:
                continue
            table, problem = _ruff_table(target, content.text)
            if problem is not None:
                problems.append(problem)
            elif table is not None:
                configs[target] = RuffConfigFile(target, content.text, table)
                added = True
        if not added:
            break
    top: HookScope | None = None
    hooks: list[HookScope] = []
    hook_pin: RuffPin | None = None
    pre_commit = contents.get(PRE_COMMIT)
    if pre_commit is not None and pre_commit.text is not None:
        top, hooks, hook_pin, problem = _pre_commit(pre_commit.text)
        if problem is not None:
            problems.append(problem)
    return LintConfig(
        ruff_configs=configs,
        problems=tuple(problems),
        pre_commit=top,
        lint_hooks=tuple(hooks),
        black_excludes=tuple(black),
        pin=hook_pin or pin,
    )


def governing_paths(config: LintConfig, paths: Sequence[str]) -> list[str]:
    """The ruff configuration files governing these paths (and what they extend), sorted."""
    used: set[str] = set()
    for path in paths:
        governing = config.governing(path)
        depth = 0
        while governing is not None and governing.path not in used and depth <= MAX_EXTEND_DEPTH:
            used.add(governing.path)
            target = _extend_target(governing)
            governing = config.ruff_configs.get(target) if target else None
            depth += 1
    return sorted(used)
