"""What the repository's own lint configuration says, read from its files at the base. Pure.

The bot lints what the repository lints, with the rules it chose, at the version it pinned:

- **Scope.** A path is not linted when the repository says so: ruff's ``exclude``/``extend-exclude``
  in the ruff configuration that governs the file (the nearest ``.ruff.toml``/``ruff.toml``/
  ``pyproject.toml`` with ``[tool.ruff]`` on its path, following ``extend``); the top-level
  ``exclude`` of ``.pre-commit-config.yaml``, or the ``exclude`` of every lint hook it runs (ruff,
  flake8, pyflakes, pylint) when each of them leaves the file out; and, when no ruff configuration
  governs the file, flake8's own ``exclude``/``extend-exclude``/``filename`` (``flake8config``;
  its ``per-file-ignores`` too) and the formatter's ``[tool.black] exclude``/``extend-exclude``.
  (Pre-commit's ``files`` patterns count the same way: a path they do not match is left out.)
- **Configs.** Every ruff configuration file on an analysed file's path, so ruff resolves them the
  way it does in a checkout (``config_paths`` lists what to read; ``extend`` targets inside the
  repository are read in a second round, ``missing_extends``). What ruff is given of them, path
  settings confined to the repository, is ``ruffinputs``.
- **Pin.** The ruff version the repository pins (pre-commit ``rev``, or ``ruff==X`` in a dev
  dependency list), so rules newer than it are not reported.

Pre-commit patterns are Python regular expressions searched in the path; ruff's are globs relative
to the directory of the configuration file that holds them; black's is a regular expression searched
in ``/`` + the path. None of them is trusted (anyone may install the App on a repository of their
own, and its base is as hostile as a pull request): they are evaluated with bounds
(``patterns``), inside the execution boundary, each file's patterns one stage (``pattern_sources``)
that ``without`` leaves out when it took too long.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Any

import yaml

from .codespan import code_span
from .flake8config import FLAKE8_CONFIGS, Flake8Config, flake8_config
from .model import FileContent, RepoTree
from .patterns import YamlRefused, compile_glob, compile_regex, load_yaml
from .refusals import TOMLDecodeError, load_toml
from .ruffpin import RuffPin, hook_pin, requirement_pin, version_tuple
from .selection import glob_regex, inside_tree
from .toolconfig import tool_config_paths

__all__ = [
    "PRE_COMMIT",
    "RUFF_CONFIGS",
    "Exclusion",
    "HookScope",
    "LintConfig",
    "PatternSource",
    "RuffConfigFile",
    "RuffPin",
    "config_paths",
    "forget_matches",
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
MAX_EXTEND_DEPTH = 3
EXCLUDES_LOST = "its excludes were not applied"


@dataclass(frozen=True, slots=True)
class Exclusion:
    source: str  # the file that says so
    pattern: str

    @property
    def reason(self) -> str:
        pattern = " ".join(self.pattern.split())
        pattern = pattern if len(pattern) <= 60 else pattern[:57] + "..."
        where = f"{code_span(self.source)}: {code_span(pattern)}"
        return f"not linted: excluded by the repository's config ({where})"


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
class PatternSource:
    """One configuration file's patterns, checked against every path as one bounded stage."""

    key: str
    what: str  # for the note when it takes too long
    check: Callable[[str], object]


@dataclass(frozen=True, slots=True)
class LintConfig:
    ruff_configs: Mapping[str, RuffConfigFile] = field(default_factory=dict)  # by path
    problems: tuple[str, ...] = ()  # ruff configuration files that could not be used, and why
    scope_problems: tuple[str, ...] = ()  # the same for the pre-commit configuration (lint scope)
    pre_commit: HookScope | None = None  # the top level: applies to every hook
    lint_hooks: tuple[HookScope, ...] = ()  # one per lint hook
    black_excludes: tuple[Exclusion, ...] = ()
    pin: RuffPin | None = None
    unapplied: frozenset[str] = frozenset()  # ruff configurations whose excludes are not applied
    flake8: Flake8Config | None = None  # the ``[flake8]`` section at the root (``flake8config``)

    def pattern_sources(self) -> list[PatternSource]:
        """Every set of pull-request patterns ``excluded`` evaluates, by the file that holds it."""
        sources: list[PatternSource] = []
        top = self.pre_commit
        if top is not None and (top.exclude or top.files):
            key = "exclude" if top.exclude else "files"
            sources.append(
                PatternSource("pre-commit", f"`{PRE_COMMIT}`: the `{key}` pattern", top.leaves_out)
            )
        if self.lint_hooks:
            hooks = self.lint_hooks
            sources.append(
                PatternSource(
                    "pre-commit-hooks",
                    f"`{PRE_COMMIT}`: the lint hooks' `exclude` patterns",
                    lambda path: [hook.leaves_out(path) for hook in hooks],
                )
            )
        for config in self.ruff_configs.values():
            if config.path not in self.unapplied:
                sources.append(
                    PatternSource(
                        f"ruff:{config.path}",
                        f"{code_span(config.path)}: the ruff `exclude` globs",
                        functools.partial(self._ruff_exclusion, config),
                    )
                )
        if self.flake8 is not None and (self.flake8.exclude or self.flake8.filename):
            sources.append(
                PatternSource(
                    "flake8",
                    f"{code_span(self.flake8.source)}: the flake8 `exclude` patterns",
                    self.flake8.excluded,
                )
            )
        if self.black_excludes:
            black = self.black_excludes
            sources.append(
                PatternSource(
                    "black",
                    f"{code_span(black[0].source)}: the black `exclude` pattern",
                    lambda path: [_search(e.pattern, "/" + path, verbose="\n" in e.pattern) for e in black],
                )
            )
        return sources

    def without(self, keys: Iterable[str]) -> LintConfig:
        """This configuration with the patterns of these sources (``pattern_sources``) left out."""
        keys = set(keys)
        return replace(
            self,
            pre_commit=None if "pre-commit" in keys else self.pre_commit,
            lint_hooks=() if "pre-commit-hooks" in keys else self.lint_hooks,
            black_excludes=() if "black" in keys else self.black_excludes,
            flake8=None if "flake8" in keys else self.flake8,
            unapplied=self.unapplied | {k.removeprefix("ruff:") for k in keys if k.startswith("ruff:")},
        )

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
        flake8 = self.flake8.excluded(path) if self.flake8 is not None else None
        if self.flake8 is not None and flake8 is not None:  # no ruff configuration: flake8 lints it
            return Exclusion(self.flake8.source, flake8)
        for exclusion in self.black_excludes:
            if _search(exclusion.pattern, "/" + path, verbose="\n" in exclusion.pattern):
                return exclusion
        return None

    def flake8_ignores(self, path: str, code: str) -> bool:
        """Whether flake8's ``per-file-ignores`` leave ruff's ``code`` out on ``path``: where no
        ruff configuration governs it, flake8 is what the repository lints with."""
        return self.flake8 is not None and self.governing(path) is None and self.flake8.ignores(path, code)

    def _ruff_exclusion(self, config: RuffConfigFile, path: str) -> Exclusion | None:
        if config.path in self.unapplied:
            return None
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
    glob = "/" + cleaned if anchored and not cleaned.startswith("/") else cleaned
    matcher = _glob(glob)
    parts = path.strip("/").split("/")
    return matcher is not None and any(matcher("/".join(parts[:i])) for i in range(len(parts), 0, -1))


@functools.lru_cache(maxsize=512)
def _glob(glob: str) -> Callable[[str], bool] | None:
    glob = glob.strip()
    if not glob or glob.startswith("#"):
        return None
    glob = re.sub(r"(?:\*\*/){2,}", "**/", glob)  # the same paths, without the nesting
    return compile_glob(glob_regex(glob))


@functools.lru_cache(maxsize=65_536)  # each source's stage evaluates it first (``pattern_sources``)
def _search(pattern: str, path: str, *, verbose: bool = False) -> bool:
    matcher = compile_regex(pattern, verbose=verbose)
    return matcher is not None and matcher(path)


def forget_matches() -> None:
    """Drop the remembered pattern results (between two analyses)."""
    _search.cache_clear()


def _extend_target(config: RuffConfigFile) -> str | None:
    """The repository path of the file ``extend`` names, when it stays inside the repository."""
    value = config.table.get("extend")
    return (inside_tree(config.directory, value) or None) if isinstance(value, str) else None


def config_paths(paths: Iterable[str], tree: RepoTree | None) -> list[str]:
    """The configuration files to read for these analysed paths: the pre-commit config, the
    dev-requirement files at the root, the other linters' (``toolconfig``), and every ruff
    configuration candidate on each path
    (only those the tree holds, when the tree is known)."""
    wanted: dict[str, None] = {PRE_COMMIT: None, **dict.fromkeys(FLAKE8_CONFIGS)}
    paths = list(paths)
    wanted.update(dict.fromkeys(tool_config_paths(paths)))  # zizmor's, shellcheck's, hadolint's
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
        data = load_toml(text)
    except TOMLDecodeError as exc:
        if name == "pyproject.toml" and "[tool.ruff" not in text:
            return None, None
        return None, f"{code_span(path)} is not valid TOML ({code_span(str(exc))})"
    if name != "pyproject.toml":
        return data, None
    tool = data.get("tool")
    table = tool.get("ruff") if isinstance(tool, dict) else None
    return (table, None) if isinstance(table, dict) else (None, None)


def _black_excludes(path: str, text: str) -> list[Exclusion]:
    try:
        tool = load_toml(text).get("tool")
    except TOMLDecodeError:
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
        data = load_yaml(text)
    except YamlRefused as exc:
        return None, [], None, f"`{PRE_COMMIT}` was not read ({exc}); {EXCLUDES_LOST}"
    except yaml.YAMLError as exc:
        return (
            None,
            [],
            None,
            f"`{PRE_COMMIT}` is not valid YAML ({code_span(' '.join(str(exc).split())[:120])})",
        )
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
            pin = pin or hook_pin(text, str(repo.get("rev") or ""))
    return HookScope.of(data), hooks, pin, None


def lint_config(contents: Mapping[str, FileContent | None]) -> LintConfig:
    """Everything above, from these configuration files (the engine reads them at the base; the
    ``config`` analyzer also reads the head's, to report what a pull request changes in them)."""
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
            pin = requirement_pin(path, content.text)
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
    hooked: RuffPin | None = None
    scope_problems: list[str] = []
    pre_commit = contents.get(PRE_COMMIT)
    if pre_commit is not None and pre_commit.text is not None:
        top, hooks, hooked, problem = _pre_commit(pre_commit.text)
        if problem is not None:
            scope_problems.append(problem)
    flake8, problem = flake8_config(contents)
    scope_problems += [problem] if problem is not None else []
    return LintConfig(
        ruff_configs=configs,
        problems=tuple(problems),
        scope_problems=tuple(scope_problems),
        pre_commit=top,
        lint_hooks=tuple(hooks),
        black_excludes=tuple(black),
        pin=hooked or pin,
        flake8=flake8,
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
