"""Python files: ruff (``ruff_runner``), run once over every analysed ``.py``/``.pyi`` file of the
pull request, its diagnostics turned into findings.

Ruff sees what it would see in a checkout. Under a fresh temporary directory go: the head contents
of the analysed files at their repository paths; every ruff configuration file on their paths
(nested ``pyproject.toml``/``ruff.toml``/``.ruff.toml`` included, so ruff picks the nearest one as it
does in the repository); and the package layout from the repository's tree (its directories and
empty stand-ins for its other Python files, ``__init__.py`` included), so first-party imports are
classified as in the repository's own CI. Ruff only parses them, nothing is executed. A
configuration always sits at the root of that directory (the repository's, or ours with
``select = ["E9", "F"]``), so nothing outside it (the server's own ``pyproject.toml``, a user
config) can leak in.

Files the repository does not lint are left out (``lintconfig``). When the repository pins an
older ruff, that ruff is run if a directory for pinned versions is configured (installed there by
the serving process, ``ruffpins``, and handed over as the ``ruff`` tool); otherwise rules that were
not stable in that version are not reported (ruff's own rule metadata says since when each rule is
stable). The summary says which ruff and which configuration ran. An unused import that is a
re-export (in an ``__init__``, or listed in ``__all__``) is not reported, and no suggestion deletes
or rewrites a line that binds a module-level alias (``bindings``).

This runs inside the execution boundary (``isolation``): ruff gets the boundary's scrubbed
environment and limits, and the configuration it reads is the repository's re-written with its
path settings kept inside the repository (``ruffinputs.ruff_inputs``). What ruff writes on stderr
is never passed on: only the name of a setting it does not know, when the configuration has it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from ..core.codespan import code_span
from ..core.lintconfig import RUFF_CONFIGS, LintConfig, governing_paths, version_tuple
from ..core.model import ChangedFile, Finding, RepoTree, Severity, Skipped
from ..core.pyversion import head_declared
from ..core.ruffinputs import RuffInput, ruff_inputs
from .base import AnalysisInput, AnalyzerOutput, FileUnderReview, Rule, finding, is_python, unreadable
from .bindings import binds_alias, exported_imports
from .ruff_runner import (
    DEFAULT_SELECT,
    RUFF_TIMEOUT,
    RuffError,
    RuffUnavailableError,
    below_configs,
    find_ruff,
    lint_in_parts,
    ruff_rule_since,
    ruff_version,
    run_ruff,
)
from .suppressions import adds_noqa, noqa_added_for, suppressed_by_pull_request

__all__ = ["SYNTAX_RULE", "PythonAnalyzer", "severity_for", "single_line_fix"]

PREFIX = "python/"
REEXPORTING = frozenset({"__init__.py", "__init__.pyi"})
SYNTAX_RULE = "python/syntax-error"
VERSION_RULE = "python/declared-version"
NEWER_SYNTAX_RULE = "python/newer-syntax"
# ruff's version-related syntax errors: the code parses, on a newer Python than the declared one.
_NEWER_SYNTAX = re.compile(r"on Python 3\.\d+ \(syntax was added in Python 3\.\d+\)")
TOOLING_DIRECTORIES = frozenset(
    {"scripts", "script", "tools", "bin", "docs", "doc", "benchmarks", "examples", ".github"}
)
_DEFAULTS = ", ".join(DEFAULT_SELECT)
MAX_DROPPED_SETTINGS = 3

_BLOCKER_CODES = frozenset({"F821", "F822", "F823"})
_CONCERN_CODES = frozenset(
    {"F811", "F632", "F702", "F704", "F706", "F707", "F722", "F601", "F602", "F631"}
    | {f"F{n}" for n in range(502, 510)}
    | {f"F{n}" for n in range(521, 526)}
)


def severity_for(code: str | None) -> Severity:
    if is_syntax_error(code):
        return Severity.BLOCKER
    assert code is not None
    if code in _BLOCKER_CODES:
        return Severity.BLOCKER
    if code in _CONCERN_CODES:
        return Severity.CONCERN
    return Severity.NIT


def is_syntax_error(code: str | None) -> bool:
    return code is None or code in ("invalid-syntax", "E999", "syntax-error")


def _row(location: Any) -> int | None:
    if isinstance(location, dict) and isinstance(location.get("row"), int):
        return int(location["row"])
    return None


def _column(location: Any) -> int | None:
    if isinstance(location, dict) and isinstance(location.get("column"), int):
        return int(location["column"])
    return None


def single_line_fix(diagnostic: Mapping[str, Any], row: int, line_text: str) -> str | None:
    """The replacement for line ``row`` when ruff's safe fix only touches that line (``""``
    deletes it); ``None`` when there is no such fix."""
    fix = diagnostic.get("fix")
    if not isinstance(fix, dict) or fix.get("applicability") != "safe":
        return None
    edits = fix.get("edits")
    if not isinstance(edits, list) or not edits:
        return None
    spans: list[tuple[int, int, str]] = []
    full = line_text + "\n"
    for edit in edits:
        if not isinstance(edit, dict) or not isinstance(edit.get("content"), str):
            return None
        start, end = edit.get("location"), edit.get("end_location")
        start_row, start_col, end_row, end_col = _row(start), _column(start), _row(end), _column(end)
        if start_row is None or start_col is None or end_row is None or end_col is None:
            return None
        if start_row != row:
            return None
        if end_row == row:
            end_offset = end_col - 1
        elif end_row == row + 1 and end_col == 1:
            end_offset = len(full)
        else:
            return None
        spans.append((start_col - 1, end_offset, edit["content"]))
    for begin, end_offset, content in sorted(spans, reverse=True):
        if not 0 <= begin <= end_offset <= len(full):
            return None
        full = full[:begin] + content + full[end_offset:]
    if full == "":
        return ""
    if not full.endswith("\n"):
        return None
    return full[:-1]


def outside_the_package(path: str) -> bool:
    """A file of the repository's own tooling (``scripts/``, ``docs/``, ``benchmarks/``, ...), which
    the package's declared Python does not cover: it runs on whatever its maintainers run."""
    return path.split("/", 1)[0] in TOOLING_DIRECTORIES


def syntax_finding(path: str, line: int, message: str, text: str) -> Finding:
    """A blocker: code that does not parse. Except newer syntax than the declared minimum Python
    (ruff's "Cannot use `match` statement on Python 3.8") in the repository's own tooling, which
    parses on the Python it runs on: a concern (``NEWER_SYNTAX_RULE``)."""
    if _NEWER_SYNTAX.search(message) and outside_the_package(path):
        return finding(
            path,
            line,
            Severity.CONCERN,
            NEWER_SYNTAX_RULE,
            f"{message}: this file is outside the package, so the declared minimum may not apply to it; "
            "does the Python that runs it have this syntax?",
            text,
        )
    return finding(path, line, Severity.BLOCKER, SYNTAX_RULE, f"Syntax error: {message}", text)


def _listed(paths: Sequence[str]) -> str:
    return ", ".join(code_span(p) for p in paths)


class PythonAnalyzer:
    name = "python"
    tools: tuple[str, ...] = ("ruff",)  # resolved by the serving process (the pinned version, when installed)
    differential: bool = True
    rules: tuple[Rule, ...] = (
        Rule(SYNTAX_RULE, Severity.BLOCKER, "a syntax error (the first one of a file)", file_level=True),
        Rule(
            NEWER_SYNTAX_RULE,
            Severity.CONCERN,
            "syntax newer than the declared minimum Python in the repository's own tooling "
            "(`scripts/`, `docs/`, `benchmarks/`, ...), which the package's declaration does not cover",
            file_level=True,
        ),
        Rule(
            VERSION_RULE,
            Severity.CONCERN,
            "the change moves the minimum Python it declares (its code is checked against the new one)",
            file_level=True,
        ),
        Rule(
            "python/<ruff code>",
            None,
            "a ruff diagnostic, with the repository's ruff configuration (else E9 and F): undefined names "
            "(F821-F823) are blockers, F5xx/F6xx/F7xx and redefinitions concerns, the rest nits",
        ),
    )

    def __init__(self, *, time_limit: float = RUFF_TIMEOUT, command: Sequence[str] | None = None) -> None:
        self.time_limit = time_limit
        self.command = command

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        # The configuration files on their paths are read at the base by the engine
        # (``lintconfig.config_paths``); the head of those the PR changes, for the Python it declares.
        return [f.path for f in files if is_python(f.path) or PurePosixPath(f.path).name in RUFF_CONFIGS]

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        out = AnalyzerOutput()
        targets: dict[str, FileUnderReview] = {}
        texts: dict[str, str] = {}
        for item in batch.files:
            if not is_python(item.path) or not batch.linted(item):
                continue
            reason = unreadable(item)
            if reason is not None:
                out.skipped.append(Skipped(item.path, f"Python checks not run: {reason}"))
                out.incomplete = True
                continue
            assert item.text is not None
            targets[item.path] = item
            texts[item.path] = item.text
        lint = batch.lint
        inputs, dropped_paths = ruff_inputs(lint, batch.configs)
        inputs, changes = head_declared(inputs, batch.contents, {item.path for item in batch.files})
        out.findings += [
            finding(c.path, c.line, Severity.CONCERN, VERSION_RULE, c.message, f"{c.before} -> {c.after}")
            for c in changes
        ]
        if not texts:
            return out
        out.notes.extend(f"the repository's ruff configuration was not used: {p}" for p in lint.problems)
        used = governing_paths(lint, list(texts))
        out.notes.extend(dropped_paths)
        for path in below_configs(list(texts), {item.path: item.text for item in inputs}):
            out.incomplete = True  # ``.ruff.toml/x.py``: the file or the configuration, not both
            out.skipped.append(
                Skipped(
                    path,
                    "Python checks not run: it is below a directory named like a ruff configuration file",
                )
            )
            del texts[path], targets[path]
        if not texts:
            return out
        layout = self._layout(batch.tree)
        given = self.command if self.command is not None else batch.tools.get("ruff")
        command = list(given) if given is not None else find_ruff()
        try:
            diagnostics = await self._run_tolerating_old_settings(texts, inputs, layout, command, out)
        except RuffUnavailableError:
            raise
        except RuffError as exc:
            if exc.crashed and len(texts) > 1:  # one file may have crashed it: the rest still count
                diagnostics = await self._in_parts(texts, inputs, layout, command, out)
            elif not lint.ruff_configs:
                return self._failed(out, targets, str(exc))
            else:
                out.notes.append(
                    f"ruff rejected the repository's configuration ({_listed(used) or 'its files'}); "
                    "default rules used instead"
                )
                used = []
                try:
                    diagnostics = await run_ruff(
                        texts, None, layout=layout, time_limit=self.time_limit, command=command
                    )
                except RuffUnavailableError:
                    raise
                except RuffError as again:
                    return self._failed(out, targets, str(again))
        diagnostics, dropped = await self._skew(diagnostics, lint, bool(used), command)
        out.notes.append(await self._which(command, used, lint, dropped))
        found = [  # flake8's per-file-ignores, where flake8 is the repository's linter
            f
            for f in self._findings(diagnostics, targets)
            if not lint.flake8_ignores(f.path, f.rule.removeprefix(PREFIX))
        ]
        out.findings.extend(found)
        await self._pr_suppressions(texts, targets, found, inputs if used else None, layout, command, out)
        return out

    async def _pr_suppressions(
        self,
        texts: Mapping[str, str],
        targets: Mapping[str, FileUnderReview],
        found: Sequence[Finding],
        inputs: Sequence[RuffInput] | None,
        layout: Sequence[str],
        command: Sequence[str],
        out: AnalyzerOutput,
    ) -> None:
        """ruff again, with ``noqa`` ignored, on the files where the pull request adds a ``noqa``,
        with the configuration the first run used (``inputs``; None: the default rules): a
        blocker only that directive hid is a finding ("suppressed by this pull request"), a
        concern or a nit stays suppressed and is listed (``suppressions``)."""
        adding = {path: text for path, text in texts.items() if adds_noqa(targets[path].lines.added_text)}
        if not adding:
            return
        try:
            if inputs is None:
                unsuppressed = await run_ruff(
                    adding, None, layout=layout, time_limit=self.time_limit, command=command, ignore_noqa=True
                )
            else:
                unsuppressed = await self._run_tolerating_old_settings(
                    adding, inputs, layout, command, out, ignore_noqa=True
                )
                out.notes[:] = list(dict.fromkeys(out.notes))  # a dropped setting is said once
        except RuffUnavailableError:
            raise
        except RuffError as exc:  # its own suppressions could not be checked: not approved on trust
            out.incomplete = True
            out.notes.append(f"the pull request's own noqa comments could not be checked ({exc})")
            return
        seen = {(f.path, f.rule, f.line) for f in found}
        for hidden in self._findings(unsuppressed, targets):
            item = targets[hidden.path]
            if (hidden.path, hidden.rule, hidden.line) in seen or hidden.line not in item.lines.added:
                continue
            directive = noqa_added_for(item.rows, item.lines.added_text, hidden.line)
            if directive is None:
                continue  # the base's own suppression: the repository's convention
            flagged = suppressed_by_pull_request(hidden, directive)
            if flagged is not None:
                out.findings.append(flagged)
            else:
                out.suppressed.append(hidden)

    async def _in_parts(
        self,
        texts: Mapping[str, str],
        inputs: Sequence[RuffInput],
        layout: Sequence[str],
        command: Sequence[str],
        out: AnalyzerOutput,
    ) -> list[dict[str, Any]]:
        """ruff crashed on the files together: the others still count (``lint_in_parts``); each
        file it still fails on is not analysed, and said so."""

        async def lint(part: Mapping[str, str]) -> list[dict[str, Any]]:
            return await self._run_tolerating_old_settings(part, inputs, layout, command, out)

        diagnostics, failed = await lint_in_parts(texts, lint)
        if failed:
            out.incomplete = True
            out.notes.append(f"ruff crashed on {len(failed)} of {len(texts)} files; the others were checked")
            out.skipped.extend(Skipped(path, f"Python checks not run: {why}") for path, why in failed.items())
        out.notes[:] = list(dict.fromkeys(out.notes))  # each part may say the same
        return diagnostics

    async def _run_tolerating_old_settings(
        self,
        texts: Mapping[str, str],
        inputs: Sequence[RuffInput],
        layout: Sequence[str],
        command: Sequence[str],
        out: AnalyzerOutput,
        *,
        ignore_noqa: bool = False,
    ) -> list[dict[str, Any]]:
        """Run ruff; a setting this ruff no longer knows (``show-source``, removed after the
        repository pinned its ruff) is dropped from the configuration and said so, rather than
        losing the whole configuration. Only a setting the configuration has is named."""
        dropped: list[str] = []
        for _ in range(MAX_DROPPED_SETTINGS + 1):
            configs = {item.path: item.text for item in inputs}
            try:
                return await run_ruff(
                    texts,
                    configs,
                    layout=layout,
                    time_limit=self.time_limit,
                    command=command,
                    ignore_noqa=ignore_noqa,
                )
            except RuffUnavailableError:
                raise
            except RuffError as exc:
                name = exc.unknown_field
                if (
                    name is None
                    or name in dropped
                    or len(dropped) >= MAX_DROPPED_SETTINGS
                    or not any(item.without(name) != item for item in inputs)
                ):
                    raise
                inputs = [item.without(name) for item in inputs]
                dropped.append(name)
                out.notes.append(
                    f"ruff {await ruff_version(command)} no longer knows the setting {code_span(name)};"
                    " it was ignored"
                )
        raise RuffError("unreachable")

    @staticmethod
    def _layout(tree: RepoTree | None) -> list[str]:
        if tree is None:
            return []
        return sorted(p for p in tree.files if is_python(p))

    async def _skew(
        self, diagnostics: list[dict[str, Any]], lint: LintConfig, configured: bool, command: Sequence[str]
    ) -> tuple[list[dict[str, Any]], int]:
        """Without the findings of rules the repository's pinned ruff did not have (stable or in
        preview, as this ruff's rule metadata says); and how many were left out."""
        if lint.pin is None or not configured:
            return diagnostics, 0
        running = version_tuple(await ruff_version(command, time_limit=self.time_limit))
        if running is not None and running <= lint.pin.version:
            return diagnostics, 0
        since = await ruff_rule_since(command, time_limit=self.time_limit)
        kept = [
            d
            for d in diagnostics
            if not isinstance(d.get("code"), str) or since.get(d["code"], ()) <= lint.pin.version
        ]
        return kept, len(diagnostics) - len(kept)

    async def _which(
        self, command: Sequence[str], used: Sequence[str], lint: LintConfig, dropped: int
    ) -> str:
        version = await ruff_version(command, time_limit=self.time_limit)
        if used:
            text = f"Python checked by ruff {version} with the repository's {_listed(used)}"
        else:
            text = f"Python checked by ruff {version} with revbot's default rules ({_DEFAULTS})"
        if lint.pin is not None and used and version_tuple(version) != lint.pin.version:
            pinned = f"{lint.pin.label} ({code_span(lint.pin.source)})"
            text += f"; rules newer than the pinned ruff {pinned} not reported"
            if dropped:
                text += f" ({dropped} finding{'s' if dropped != 1 else ''} left out)"
        return text

    @staticmethod
    def _failed(out: AnalyzerOutput, targets: Mapping[str, FileUnderReview], error: str) -> AnalyzerOutput:
        out.incomplete = True
        out.notes.append(f"Python checks could not run ({error})")
        out.skipped.extend(Skipped(path, f"Python checks not run: {error}") for path in targets)
        return out

    @staticmethod
    def _re_export(
        item: FileUnderReview, row: int, column: int | None, exported: dict[str, frozenset[tuple[int, int]]]
    ) -> bool:
        """An import in a package's ``__init__`` (its interface), or of a name the module lists
        in ``__all__`` (whichever way: ruff misses ``__all__.extend``): a re-export, not unused."""
        if PurePosixPath(item.path).name in REEXPORTING:
            return True
        if item.path not in exported:
            exported[item.path] = exported_imports(item.text or "")
        return (row, column) in exported[item.path]

    def _findings(
        self, diagnostics: Sequence[Mapping[str, Any]], targets: Mapping[str, FileUnderReview]
    ) -> list[Finding]:
        found: list[Finding] = []
        syntax_reported: set[str] = set()
        exported: dict[str, frozenset[tuple[int, int]]] = {}  # path -> its imports listed in __all__
        for diagnostic in diagnostics:
            path = diagnostic.get("filename")
            item = targets.get(path) if isinstance(path, str) else None
            row = _row(diagnostic.get("location"))
            if item is None or item.text is None or row is None:
                continue
            code = diagnostic.get("code")
            code = code if isinstance(code, str) else None
            lines = item.rows
            line_text = lines[row - 1] if 0 < row <= len(lines) else ""
            line_no = max(1, min(row, len(lines))) if lines else 1
            message = str(diagnostic.get("message") or "").strip().splitlines()
            short = message[0] if message else "problem reported by ruff"
            if is_syntax_error(code):
                if item.path in syntax_reported:
                    continue  # later syntax errors usually follow from the first one
                syntax_reported.add(item.path)
                found.append(syntax_finding(item.path, line_no, short, line_text))
                continue
            assert code is not None
            if code == "F401" and self._re_export(item, row, _column(diagnostic.get("location")), exported):
                continue
            offer = row in item.lines.added and not binds_alias(line_text)
            suggestion = single_line_fix(diagnostic, row, line_text) if offer else None
            found.append(
                finding(
                    item.path,
                    line_no,
                    severity_for(code),
                    f"{PREFIX}{code}",
                    f"{short} ({code})",
                    line_text,
                    suggestion=suggestion,
                    docs=str(diagnostic.get("url") or ""),
                )
            )
        return found
