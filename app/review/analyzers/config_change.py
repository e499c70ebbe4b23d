"""A pull request that changes what the bot analyses, or how: its own finding.

The verdict's inputs come from the base (the engine reads the lint configuration there, the use
case reads the bot's settings from the default branch), so a pull request is always judged by
the rules it was opened against. What it changes in them is reported here, as a concern, so a
person sees it before merging: ruff rules it turns off (``select``, ``ignore``,
``per-file-ignores``), exclude patterns it adds (ruff, pre-commit, black), and a change to the
bot's own settings file (skip patterns added, a higher file limit). The head's side of these
files is parsed here, inside the execution boundary, like everything the pull request wrote.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

import yaml
from pydantic import ValidationError

from ...repoconfig import RepoConfig
from ..core.lintconfig import PRE_COMMIT, RUFF_CONFIGS, LintConfig, RuffConfigFile, lint_config
from ..core.model import ChangedFile, FileContent, Finding, ReviewSettings, Severity
from ..core.patterns import YamlRefused, load_yaml, strip_verbose
from .base import AnalysisInput, AnalyzerOutput, FileUnderReview, Rule, finding
from .ruff_runner import DEFAULT_SELECT

__all__ = [
    "EXCLUDES",
    "RULES_OFF",
    "SETTINGS",
    "ConfigChangeAnalyzer",
    "alternatives",
    "covers",
    "ruff_selection",
    "turned_off",
]

RULES_OFF = "config/lint-rules-off"
EXCLUDES = "config/lint-excludes"
SETTINGS = "config/bot-settings"
RUFF_DEFAULT_SELECT = ("E4", "E7", "E9", "F")
_SELECTOR = re.compile(r"([A-Z]+)([0-9]*)")  # ruff's own, for a configuration without ``select``
MAX_LISTED = 8
APPLIES_AT_MERGE = "this review used the base's, and the change applies only once merged"


def _listed(items: Iterable[str]) -> str:
    ordered = sorted(items)
    shown = ", ".join(f"`{item}`" for item in ordered[:MAX_LISTED])
    return shown + (f" and {len(ordered) - MAX_LISTED} more" if len(ordered) > MAX_LISTED else "")


def _codes(table: Mapping[str, Any], key: str) -> frozenset[str] | None:
    lint = table.get("lint")
    value = lint.get(key, table.get(key)) if isinstance(lint, dict) else table.get(key)
    return frozenset(str(v) for v in value) if isinstance(value, list) else None


def _per_file(table: Mapping[str, Any]) -> frozenset[str]:
    lint = table.get("lint")
    found: set[str] = set()
    for key in ("per-file-ignores", "extend-per-file-ignores"):
        value = lint.get(key, table.get(key)) if isinstance(lint, dict) else table.get(key)
        if isinstance(value, dict):
            found |= {
                f"{code} in {pattern}"
                for pattern, codes in value.items()
                if isinstance(codes, list)
                for code in codes
            }
    return frozenset(found)


def ruff_selection(config: RuffConfigFile | None) -> tuple[frozenset[str], frozenset[str]]:
    """(selected, ignored) rule selectors of a ruff configuration; no configuration: revbot's
    defaults. Selectors are compared as written (``F`` and ``F821`` are different entries)."""
    if config is None:
        return frozenset(DEFAULT_SELECT), frozenset()
    table = config.table
    select = _codes(table, "select")
    selected = (select if select is not None else frozenset(RUFF_DEFAULT_SELECT)) | (
        _codes(table, "extend-select") or frozenset()
    )
    ignored = (_codes(table, "ignore") or frozenset()) | (_codes(table, "extend-ignore") or frozenset())
    return selected, ignored | _per_file(table)


def _split(selector: str) -> tuple[str, str]:
    match = _SELECTOR.fullmatch(selector.strip().upper())
    return (match.group(1), match.group(2)) if match else (selector, "")


def covers(selectors: Iterable[str], code: str) -> bool:
    """Whether one of ruff's ``selectors`` selects ``code`` (a code or a prefix): ``ALL``, the
    same linter's letters with leading digits (``E`` covers ``E9`` and ``E501``, not ``EM101``),
    ``PL`` every pylint group."""
    letters, digits = _split(code)
    for selector in selectors:
        if selector.strip().upper() == "ALL":
            return True
        s_letters, s_digits = _split(selector)
        same = s_letters == letters or (s_letters == "PL" and letters in ("PLC", "PLE", "PLR", "PLW"))
        if same and digits.startswith(s_digits):
            return True
    return False


def turned_off(
    before: tuple[frozenset[str], frozenset[str]], after: tuple[frozenset[str], frozenset[str]]
) -> frozenset[str]:
    """The selectors a change turns off (``ruff_selection`` of each side): selected before and no
    longer covered, or newly ignored while the base selected them and did not ignore them. A
    per-file ignore (``"E501 in tests/*"``) is compared as written."""
    selected, ignored = before
    now_selected, now_ignored = after
    dropped = {s for s in selected if not covers(now_selected, s)}
    added = {
        s
        for s in now_ignored - ignored
        if (" in " in s)
        or ((covers(selected, s) or any(covers([s], x) for x in selected)) and not covers(ignored, s))
    }
    return frozenset(dropped | added)


def alternatives(patterns: Iterable[str]) -> frozenset[str]:
    """The alternatives of these regular expressions, whitespace and grouping aside: a pattern
    re-indented, or with one alternative removed, adds nothing (black's and pre-commit's excludes
    are one verbose regex each, ``/(\\.git|\\.tox|build)/`` over many lines)."""
    out: set[str] = set()
    for pattern in patterns:
        flat = re.sub(r"\s+", "", strip_verbose(pattern) if "\n" in pattern else pattern)
        if flat.startswith("files:"):  # what is linted, not what is left out: compared whole
            out.add(flat)
            continue
        for part in flat.split("|"):  # an alternative, without the group around the lot
            part = re.sub(r"^\(\?[a-zA-Z]+\)", "", part)  # an inline flag: (?x)
            part = re.sub(r"\)+[/$]*$", "", re.sub(r"^[\^/]*\((?:\?:)?", "", part))
            out |= {part} if part else set()
    return frozenset(out)


def _excludes(config: RuffConfigFile | None) -> frozenset[str]:
    if config is None:
        return frozenset()
    return frozenset(
        str(p)
        for key in ("exclude", "extend-exclude")
        if isinstance(config.table.get(key), list)
        for p in config.table[key]
    )


def _scope(path: str) -> str:
    directory = str(PurePosixPath(path).parent)
    return "the whole repository" if directory == "." else f"`{directory}/`"


class ConfigChangeAnalyzer:
    name = "config"
    tools: tuple[str, ...] = ()
    differential: bool = False
    rules: tuple[Rule, ...] = (
        Rule(
            RULES_OFF,
            Severity.CONCERN,
            "ruff rules a pull request turns off (select, ignore, per-file-ignores); the base's apply",
            file_level=True,
        ),
        Rule(
            EXCLUDES,
            Severity.CONCERN,
            "lint exclude patterns a pull request adds (ruff, pre-commit, black); the base's apply",
            file_level=True,
        ),
        Rule(
            SETTINGS,
            Severity.CONCERN,
            "a change to the bot's own settings file; the default branch's apply",
            file_level=True,
        ),
    )

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        return [f.path for f in files if _is_lint_config(f.path)]

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        out = AnalyzerOutput()
        changed = {item.path: item for item in batch.files}
        head_configs = {p: batch.contents.get(p) for p in changed if _is_lint_config(p)}
        if head_configs:
            head = lint_config(head_configs)
            out.findings += self._ruff_changes(batch.lint, head, changed)
            out.findings += self._scope_changes(batch.lint, head, changed)
        settings_path = batch.settings.settings_path
        if settings_path is not None and settings_path in changed:
            out.findings.append(
                _settings_change(changed[settings_path], batch.contents.get(settings_path), batch.settings)
            )
        return out

    def _ruff_changes(
        self, base: LintConfig, head: LintConfig, changed: Mapping[str, FileUnderReview]
    ) -> list[Finding]:
        found: list[Finding] = []
        for path, config in head.ruff_configs.items():
            if path not in changed:
                continue
            # What governed this directory before: the same file at the base, else the nearest one.
            before = base.ruff_configs.get(path) or base.governing(path)
            off = turned_off(ruff_selection(before), ruff_selection(config))
            if off:
                message = f"This pull request turns off ruff rules {_listed(off)} for {_scope(path)}"
                message += f"; {APPLIES_AT_MERGE}"
                found.append(_finding(changed[path], RULES_OFF, message))
            added = _excludes(config) - _excludes(base.ruff_configs.get(path))
            if added:
                message = f"This pull request adds ruff exclude patterns {_listed(added)} (`{path}`)"
                message += f"; {APPLIES_AT_MERGE}"
                found.append(_finding(changed[path], EXCLUDES, message))
        return found

    def _scope_changes(
        self, base: LintConfig, head: LintConfig, changed: Mapping[str, FileUnderReview]
    ) -> list[Finding]:
        found: list[Finding] = []
        if PRE_COMMIT in changed:
            added = alternatives(_hook_patterns(head)) - alternatives(_hook_patterns(base))
            if added:
                message = (
                    f"This pull request adds pre-commit exclude patterns {_listed(added)}; {APPLIES_AT_MERGE}"
                )
                found.append(_finding(changed[PRE_COMMIT], EXCLUDES, message))
        if "pyproject.toml" in changed:
            added = alternatives(e.pattern for e in head.black_excludes) - alternatives(
                e.pattern for e in base.black_excludes
            )
            if added:
                message = (
                    f"This pull request adds black exclude patterns {_listed(added)}; {APPLIES_AT_MERGE}"
                )
                found.append(_finding(changed["pyproject.toml"], EXCLUDES, message))
        return found


def _hook_patterns(config: LintConfig) -> list[str]:
    scopes = (
        [config.pre_commit, *config.lint_hooks] if config.pre_commit is not None else list(config.lint_hooks)
    )
    patterns = [scope.exclude for scope in scopes if scope.exclude]
    patterns += [f"files: {scope.files}" for scope in scopes if scope.files]
    return patterns


def _is_lint_config(path: str) -> bool:
    return path == PRE_COMMIT or PurePosixPath(path).name in RUFF_CONFIGS


def _finding(item: FileUnderReview, rule: str, message: str) -> Finding:
    """On the file's first changed line (where a comment can go), fingerprinted by what it says."""
    line = min(item.lines.added) if item.lines.added else 1
    return finding(item.path, line, Severity.CONCERN, rule, message, message)


def _settings_change(item: FileUnderReview, content: FileContent | None, settings: ReviewSettings) -> Finding:
    """What the pull request's version of the bot's settings file would loosen, as far as it can be
    read; the change is reported whatever it is (the default branch's settings applied)."""
    weakened: list[str] = []
    text = content.text if content is not None else None
    try:
        data = load_yaml(text) if text else None
        head = RepoConfig.model_validate(data) if isinstance(data, dict) else None
    except (YamlRefused, yaml.YAMLError, ValidationError):
        head = None
    if head is not None:
        added = set(head.review.paths_ignore) - set(settings.paths_ignore)
        if added:
            weakened.append(f"adds skip patterns {_listed(added)}")
        if head.review.max_files > settings.max_files:
            weakened.append(f"raises review.max_files to {head.review.max_files}")
        if head.review.approve:
            weakened.append("turns approval on")
    what = f": it {', '.join(weakened)}" if weakened else ""
    message = f"This pull request changes the bot's settings (`{item.path}`){what}; {APPLIES_AT_MERGE}"
    return _finding(item, SETTINGS, message)
