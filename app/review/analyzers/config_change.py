"""A pull request that changes what the bot analyses, or how: its own finding.

The verdict's inputs come from the base (the engine reads the lint configuration there, the use
case reads the bot's settings from the default branch), so a pull request is always judged by
the rules it was opened against. What it changes in them is reported here, as a concern, so a
person sees it before merging: ruff rules it turns off (``select``, ``ignore``,
``per-file-ignores``; flake8's ``per-file-ignores`` entries it adds), exclude patterns it adds
(ruff, pre-commit, flake8, black), and a change to the bot's own settings file (skip patterns
added, a higher file limit). The head's side of these files is parsed here, inside the execution
boundary, like everything the pull request wrote.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

import yaml
from pydantic import ValidationError

from ...settings.repoconfig import RepoConfig
from ..core.flake8config import FLAKE8_CONFIGS, Flake8Config
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
    "enabled",
    "ruff_selection",
    "turned_off",
]

RULES_OFF = "config/lint-rules-off"
EXCLUDES = "config/lint-excludes"
SETTINGS = "config/bot-settings"
RUFF_DEFAULT_SELECT = ("E4", "E7", "E9", "F")  # ruff's own, for a configuration without ``select``
_SELECTOR = re.compile(r"([A-Z]+)([0-9]*)")  # a rule code or prefix: the linter's letters, digits
MAX_ALTERNATIVES = 256  # the strings a pattern's alternations spell, past which it is compared whole
MAX_GROUP_DEPTH = 32  # groups in groups: past it, compared whole (a bounded recursion)
FILES = "files: "  # a pre-commit hook's ``files`` pattern, among its excludes (what it lints)
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
    """(selected, ignored) rule selectors of a ruff configuration, as written; no configuration:
    revbot's defaults. What they enable is ``enabled``'s to say."""
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


def enabled(code: str, selected: Iterable[str], ignored: Iterable[str]) -> bool:
    """Whether ruff enables ``code`` (a code or a prefix) under these selectors: as ruff breaks
    ties, the most specific selector that covers it decides (``ALL``, then ``E``, ``E5``,
    ``E501``), an ignore winning over a select as specific (``select = ["E501"]`` with
    ``ignore = ["E"]`` keeps E501)."""

    def specificity(selectors: Iterable[str]) -> int:
        covering = [s for s in selectors if covers([s], code)]
        return max((0 if s.strip().upper() == "ALL" else len(s.strip()) for s in covering), default=-1)

    chosen = specificity(selected)
    return chosen >= 0 and chosen > specificity(ignored)


def turned_off(
    before: tuple[frozenset[str], frozenset[str]], after: tuple[frozenset[str], frozenset[str]]
) -> frozenset[str]:
    """The selectors a change turns off (``ruff_selection`` of each side): one selected, or newly
    ignored, that the base enabled and the head does not (``enabled``). A per-file ignore
    (``"E501 in tests/*"``) is compared as written."""
    selected, ignored = before
    now_selected, now_ignored = after

    def off(code: str) -> bool:
        return enabled(code, selected, ignored) and not enabled(code, now_selected, now_ignored)

    dropped = {s for s in selected if off(s)}
    added = {s for s in now_ignored - ignored if " in " in s or off(s)}
    return frozenset(dropped | added)


def alternatives(patterns: Iterable[str]) -> frozenset[str]:
    """The strings these regular expressions' alternations spell, layout aside: black's exclude
    ``/(\\.git|build)/`` (one verbose regex over many lines) is ``/\\.git/`` and ``/build/``, so a
    pattern re-indented, regrouped or with an alternative removed adds nothing. A ``files:``
    pattern (what is linted, not what is left out), a group repeated (``(a|b)+``), a pattern past
    ``MAX_ALTERNATIVES`` or not balanced are compared whole."""
    out: set[str] = set()
    for pattern in patterns:
        files = pattern.startswith(FILES)
        pattern = pattern.removeprefix(FILES)
        verbose = "\n" in pattern or pattern.lstrip().startswith("(?x)")
        flat = re.sub(r"\s+", "", strip_verbose(pattern) if verbose else pattern)
        flat = re.sub(r"^\(\?[aiLmsux]+\)", "", flat)  # the pattern's flags: (?x)
        spelt = None if files else _spelt(flat)
        out |= spelt if spelt is not None else {FILES + flat if files else flat}
    return frozenset(s for s in out if s)


class _Unspelt(Exception):
    """A pattern ``_spelt`` does not expand: compared whole."""


def _spelt(pattern: str) -> set[str] | None:
    """The strings ``pattern``'s alternations spell, each group's alternatives in turn; None when
    past ``MAX_ALTERNATIVES``, ``MAX_GROUP_DEPTH`` or not balanced."""
    at = 0

    def alternation(depth: int) -> set[str]:
        nonlocal at
        if depth > MAX_GROUP_DEPTH:
            raise _Unspelt
        out = sequence(depth)
        while at < len(pattern) and pattern[at] == "|":
            at += 1
            out |= sequence(depth)
        return out

    def sequence(depth: int) -> set[str]:
        out = {""}
        while at < len(pattern) and pattern[at] not in "|)":
            tails = atom(depth)
            if len(out) * len(tails) > MAX_ALTERNATIVES:
                raise _Unspelt
            out = {head + tail for head in out for tail in tails}
        return out

    def atom(depth: int) -> set[str]:
        nonlocal at
        start = at
        if pattern[at] == "\\":
            at += 2
        elif pattern[at] == "[":  # a class, ``]`` first in it is a member
            at = pattern.find("]", at + (3 if pattern.startswith("[^", at) else 2))
            at = len(pattern) if at < 0 else at + 1
        elif pattern[at] == "(":
            # A plain or named group is spelt out; a look-around or a flag group stays as written.
            spelt = not pattern.startswith("?", at + 1) or pattern.startswith(("?:", "?P<"), at + 1)
            at = pattern.find(">", at) if pattern.startswith("?P<", at + 1) else at
            if at < 0:
                raise _Unspelt
            at += 1
            inner = alternation(depth + 1)
            if at >= len(pattern) or pattern[at] != ")":
                raise _Unspelt
            at += 1
            if spelt and not (at < len(pattern) and pattern[at] in "*+?{"):
                return inner
        else:
            at += 1
        return {pattern[start:at]}

    try:
        spelt = alternation(0)
    except _Unspelt:
        return None
    return spelt if at == len(pattern) else None


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
            "ruff rules a pull request turns off (select, ignore, per-file-ignores; flake8's "
            "per-file-ignores); the base's apply",
            file_level=True,
        ),
        Rule(
            EXCLUDES,
            Severity.CONCERN,
            "lint exclude patterns a pull request adds (ruff, pre-commit, flake8, black); the base's apply",
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
            # flake8 reads the first of its files with a section: those the PR left are the base's.
            kept = {p: batch.configs.get(p) for p in FLAKE8_CONFIGS if p not in changed}
            head = lint_config({**kept, **head_configs})
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
        if head.flake8 is not None and head.flake8.source in changed:
            found += _flake8_changes(base.flake8, head.flake8, changed[head.flake8.source])
        return found


def _flake8_changes(base: Flake8Config | None, head: Flake8Config, item: FileUnderReview) -> list[Finding]:
    """What the head's ``[flake8]`` section leaves out that the base's did not: exclude patterns
    (a new ``filename`` list among them), and ``per-file-ignores`` entries (pattern and code)."""
    before = base if base is not None else Flake8Config(head.source)
    added = {p.text for p in head.exclude} - {p.text for p in before.exclude}
    filename = {p.text for p in head.filename}
    if filename and filename != {p.text for p in before.filename}:
        added.add("filename: " + ",".join(sorted(filename)))
    ignores = {f"{p.text}: {c}" for p, codes in head.per_file_ignores for c in codes}
    ignores -= {f"{p.text}: {c}" for p, codes in before.per_file_ignores for c in codes}
    where = f"(`{item.path}`); {APPLIES_AT_MERGE}"
    found: list[Finding] = []
    if added:
        message = f"This pull request adds flake8 exclude patterns {_listed(added)} {where}"
        found.append(_finding(item, EXCLUDES, message))
    if ignores:
        message = f"This pull request adds flake8 per-file-ignores {_listed(ignores)} {where}"
        found.append(_finding(item, RULES_OFF, message))
    return found


def _hook_patterns(config: LintConfig) -> list[str]:
    scopes = (
        [config.pre_commit, *config.lint_hooks] if config.pre_commit is not None else list(config.lint_hooks)
    )
    patterns = [scope.exclude for scope in scopes if scope.exclude]
    patterns += [f"{FILES}{scope.files}" for scope in scopes if scope.files]
    return patterns


def _is_lint_config(path: str) -> bool:
    return path == PRE_COMMIT or path in FLAKE8_CONFIGS or PurePosixPath(path).name in RUFF_CONFIGS


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
