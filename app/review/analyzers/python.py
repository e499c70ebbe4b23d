"""Python files: ruff, run once over every analysed ``.py``/``.pyi`` file of the pull request.

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
stable). The summary says which ruff and which configuration ran.

This runs inside the execution boundary (``isolation``): ruff gets the boundary's scrubbed
environment and limits, and the configuration it reads is the repository's re-written with its
path settings kept inside the repository (``lintconfig.ruff_inputs``). What ruff writes on stderr
is never passed on: only the name of a setting it does not know, when the configuration has it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from ..lintconfig import RUFF_CONFIGS, LintConfig, RuffInput, governing_paths, ruff_inputs, version_tuple
from ..model import ChangedFile, Finding, RepoTree, Severity, Skipped
from . import AnalysisInput, AnalyzerOutput, FileUnderReview, finding, is_python

__all__ = [
    "DEFAULT_SELECT",
    "SYNTAX_RULE",
    "PythonAnalyzer",
    "RuffError",
    "RuffUnavailableError",
    "find_ruff",
    "ruff_rule_since",
    "ruff_version",
    "run_ruff",
    "severity_for",
]

SYNTAX_RULE = "python/syntax-error"
DEFAULT_SELECT = ("E9", "F")
RUFF_TIMEOUT = 60.0
DEFAULT_CONFIG = f"[lint]\nselect = [{', '.join(repr(code) for code in DEFAULT_SELECT)}]\n"
_DEFAULTS = ", ".join(DEFAULT_SELECT)
INSTALL_TIMEOUT = 180.0
MAX_DROPPED_SETTINGS = 3
_UNKNOWN_FIELD = re.compile(r"unknown field `([A-Za-z0-9_-]+)`")
MAX_LAYOUT_FILES = 50_000  # stand-ins written for the package layout; beyond this, __init__.py only

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BLOCKER_CODES = frozenset({"F821", "F822", "F823"})
_CONCERN_CODES = frozenset(
    {"F811", "F632", "F702", "F704", "F706", "F707", "F722", "F601", "F602", "F631"}
    | {f"F{n}" for n in range(502, 510)}
    | {f"F{n}" for n in range(521, 526)}
)


class RuffError(RuntimeError):
    """ruff ran but did not produce a usable result. The message is ours, never ruff's stderr;
    ``unknown_field`` is the one thing read from it: a setting this ruff does not know."""

    def __init__(self, message: str, *, unknown_field: str | None = None) -> None:
        super().__init__(message)
        self.unknown_field = unknown_field


class RuffUnavailableError(RuffError):
    """ruff is not installed next to this Python: a deployment problem, not a review result."""


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


def find_ruff() -> list[str]:
    """The command that runs ruff: the binary next to this interpreter, else on PATH, else
    ``python -m ruff``."""
    here = Path(sys.executable).parent
    for name in ("ruff", "ruff.exe"):
        candidate = here / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return [str(candidate)]
    on_path = shutil.which("ruff")
    if on_path:
        return [on_path]
    import importlib.util

    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    raise RuffUnavailableError(
        "ruff is not installed: the built-in reviewer needs it for Python files "
        f"(pip install ruff into the environment of {sys.executable})"
    )


def _safe_relative(path: str) -> PurePosixPath | None:
    candidate = PurePosixPath(path)
    if (
        not path
        or "\0" in path
        or "\\" in path
        or candidate.is_absolute()
        or any(part in ("", ".", "..") for part in path.split("/"))
    ):
        return None
    return candidate


def _write(root: Path, path: str, text: str) -> None:
    if _safe_relative(path) is None:
        raise RuffError(f"refusing to write {path!r} outside the temporary directory")
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)


def _is_ruff_config(name: str, text: str | None) -> bool:
    if text is None:
        return False
    if name != "pyproject.toml":
        return True
    try:
        tool = tomllib.loads(text).get("tool")
    except tomllib.TOMLDecodeError:
        return False
    return isinstance(tool, dict) and isinstance(tool.get("ruff"), dict)


def _prepare(
    tmp: str, files: Mapping[str, str], configs: Mapping[str, str] | None, layout: Sequence[str]
) -> tuple[Path, list[str]]:
    """Write the package layout (empty stand-ins), the configuration files, and every analysed file
    at its repository path below ``tmp``; the resolved root and the paths to pass to ruff. Without
    a configuration at the root, ours goes there."""
    root = Path(tmp).resolve()
    configs = dict(configs or {})
    if not any(_is_ruff_config(name, configs.get(name)) for name in RUFF_CONFIGS):
        # Ours goes first in ruff's precedence, ahead of a root pyproject.toml without [tool.ruff].
        configs[".ruff.toml"] = DEFAULT_CONFIG
    stand_ins = [p for p in layout if p not in files and p not in configs and _safe_relative(p) is not None]
    if len(stand_ins) > MAX_LAYOUT_FILES:
        stand_ins = [p for p in stand_ins if p.endswith("/__init__.py")][:MAX_LAYOUT_FILES]
    for path in stand_ins:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    for path, text in {**configs, **files}.items():
        _write(root, path, text)
    return root, list(files)


def _parse_output(stdout: bytes, root: Path) -> list[dict[str, Any]]:
    try:
        diagnostics = json.loads(stdout or b"[]")
    except ValueError as exc:
        raise RuffError(f"ruff's output is not JSON: {exc}") from exc
    if not isinstance(diagnostics, list):
        raise RuffError("ruff's output is not a list of diagnostics")
    out: list[dict[str, Any]] = []
    for item in diagnostics:
        if not isinstance(item, dict) or not isinstance(item.get("filename"), str):
            continue
        try:
            repo_path = Path(os.path.realpath(item["filename"])).relative_to(root).as_posix()
        except ValueError:
            continue
        out.append({**item, "filename": repo_path})
    return out


async def _run(cmd: Sequence[str], root: Path, time_limit: float) -> bytes:
    try:
        process = await asyncio.create_subprocess_exec(
            *cmd,
            cwd=root,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError as exc:
        raise RuffUnavailableError(f"ruff could not be started: {exc}") from exc
    try:
        async with asyncio.timeout(time_limit):
            stdout, stderr = await process.communicate()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise RuffError(f"ruff timed out after {time_limit:g} s") from None
    if process.returncode != 0:
        unknown = _UNKNOWN_FIELD.search(stderr.decode(errors="replace"))
        raise RuffError(
            f"ruff exited with status {process.returncode}",
            unknown_field=unknown.group(1) if unknown else None,
        )
    return stdout


async def run_ruff(
    files: Mapping[str, str],
    configs: Mapping[str, str] | None,
    *,
    layout: Sequence[str] = (),
    time_limit: float = RUFF_TIMEOUT,
    command: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Lint ``files`` (repository path -> text) in ONE ruff invocation, with ``configs``
    (repository path -> text; None or no root config: ours at the root) and the ``layout`` (other
    repository paths, written empty); ruff's JSON diagnostics, with ``filename`` rewritten to the
    repository path. Paths must be safe relative paths."""
    if not files:
        return []
    cmd = list(command) if command is not None else find_ruff()
    with tempfile.TemporaryDirectory(prefix="revbot-ruff-") as tmp:
        root, relative = await asyncio.to_thread(_prepare, tmp, files, configs, layout)
        args = [*cmd, "check", "--output-format", "json", "--no-cache", "--exit-zero", "--no-fix"]
        args += ["--force-exclude", "--", *relative]  # the repository's own excludes apply
        return _parse_output(await _run(args, root, time_limit), root)


_VERSION_CACHE: dict[tuple[str, ...], str] = {}
_SINCE_CACHE: dict[tuple[str, ...], dict[str, tuple[int, ...]]] = {}


async def ruff_version(command: Sequence[str], *, time_limit: float = RUFF_TIMEOUT) -> str:
    """``ruff --version``'s number (``"0.6.9"``), asked once per command."""
    key = tuple(command)
    if key not in _VERSION_CACHE:
        out = await _run([*command, "--version"], Path(tempfile.gettempdir()), time_limit)
        words = out.decode(errors="replace").split()
        _VERSION_CACHE[key] = words[1] if len(words) > 1 else "unknown"
    return _VERSION_CACHE[key]


async def ruff_rule_since(
    command: Sequence[str], *, time_limit: float = RUFF_TIMEOUT
) -> dict[str, tuple[int, ...]]:
    """Rule code -> the ruff version since which it is in its current state (stable, or preview),
    from ``ruff rule --all``'s metadata; asked once per command. Empty when this ruff does not say."""
    key = tuple(command)
    if key not in _SINCE_CACHE:
        out = await _run(
            [*command, "rule", "--all", "--output-format", "json"], Path(tempfile.gettempdir()), time_limit
        )
        since: dict[str, tuple[int, ...]] = {}
        try:
            rules = json.loads(out or b"[]")
        except ValueError:
            rules = []
        for rule in rules if isinstance(rules, list) else []:
            status = rule.get("status") if isinstance(rule, dict) else None
            if not isinstance(status, dict) or not isinstance(rule.get("code"), str):
                continue
            for state in status.values():
                version = version_tuple(str(state.get("since", ""))) if isinstance(state, dict) else None
                if version is not None:
                    since[rule["code"]] = version
        _SINCE_CACHE[key] = since
    return _SINCE_CACHE[key]


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


def _listed(paths: Sequence[str]) -> str:
    return ", ".join(f"`{p}`" for p in paths)


class PythonAnalyzer:
    name = "python"

    tools: tuple[str, ...] = ("ruff",)  # resolved by the serving process (the pinned version, when installed)

    def __init__(self, *, time_limit: float = RUFF_TIMEOUT, command: Sequence[str] | None = None) -> None:
        self.time_limit = time_limit
        self.command = command

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        # The configuration files on their paths are read by the engine (``lintconfig.config_paths``).
        return [f.path for f in files if is_python(f.path)]

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        out = AnalyzerOutput()
        targets: dict[str, FileUnderReview] = {}
        texts: dict[str, str] = {}
        for item in batch.files:
            if not is_python(item.path) or not batch.linted(item):
                continue
            reason = self._unreadable(item)
            if reason is None and _safe_relative(item.path) is None:
                reason = "unusual path"
            if reason is not None:
                out.skipped.append(Skipped(item.path, f"Python checks not run: {reason}"))
                out.incomplete = True
                continue
            assert item.text is not None
            targets[item.path] = item
            texts[item.path] = item.text
        if not texts:
            return out

        lint = batch.lint
        out.notes.extend(f"the repository's ruff configuration was not used: {p}" for p in lint.problems)
        used = governing_paths(lint, list(texts))
        inputs, dropped_paths = ruff_inputs(lint, batch.contents)
        out.notes.extend(dropped_paths)
        layout = self._layout(batch.tree)
        given = self.command if self.command is not None else batch.tools.get("ruff")
        command = list(given) if given is not None else find_ruff()
        try:
            diagnostics = await self._run_tolerating_old_settings(texts, inputs, layout, command, out)
        except RuffUnavailableError:
            raise
        except RuffError as exc:
            if not lint.ruff_configs:
                return self._failed(out, targets, str(exc))
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
        out.findings.extend(self._findings(diagnostics, targets))
        return out

    async def _run_tolerating_old_settings(
        self,
        texts: Mapping[str, str],
        inputs: Sequence[RuffInput],
        layout: Sequence[str],
        command: Sequence[str],
        out: AnalyzerOutput,
    ) -> list[dict[str, Any]]:
        """Run ruff; a setting this ruff no longer knows (``show-source``, removed after the
        repository pinned its ruff) is dropped from the configuration and said so, rather than
        losing the whole configuration. Only a setting the configuration has is named."""
        dropped: list[str] = []
        for _ in range(MAX_DROPPED_SETTINGS + 1):
            configs = {item.path: item.text for item in inputs}
            try:
                return await run_ruff(
                    texts, configs, layout=layout, time_limit=self.time_limit, command=command
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
                    f"ruff {await ruff_version(command)} no longer knows the setting `{name}`; it was ignored"
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
            text += f"; rules newer than the pinned ruff {lint.pin.label} (`{lint.pin.source}`) not reported"
            if dropped:
                text += f" ({dropped} finding{'s' if dropped != 1 else ''} left out)"
        return text

    @staticmethod
    def _unreadable(item: FileUnderReview) -> str | None:
        if item.content is None:
            return "content not available at the head commit"
        if item.content.is_binary:
            return "the file is binary"
        if item.content.text is None:
            return "content too large to read"
        return None

    @staticmethod
    def _failed(out: AnalyzerOutput, targets: Mapping[str, FileUnderReview], error: str) -> AnalyzerOutput:
        out.incomplete = True
        out.notes.append(f"Python checks could not run ({error})")
        out.skipped.extend(Skipped(path, f"Python checks not run: {error}") for path in targets)
        return out

    def _findings(
        self, diagnostics: Sequence[Mapping[str, Any]], targets: Mapping[str, FileUnderReview]
    ) -> list[Finding]:
        found: list[Finding] = []
        syntax_reported: set[str] = set()
        for diagnostic in diagnostics:
            path = diagnostic.get("filename")
            item = targets.get(path) if isinstance(path, str) else None
            row = _row(diagnostic.get("location"))
            if item is None or item.text is None or row is None:
                continue
            code = diagnostic.get("code")
            code = code if isinstance(code, str) else None
            lines = _LINE_BREAK.split(item.text)
            if lines and lines[-1] == "":
                lines.pop()
            line_text = lines[row - 1] if 0 < row <= len(lines) else ""
            line_no = max(1, min(row, len(lines))) if lines else 1
            message = str(diagnostic.get("message") or "").strip().splitlines()
            short = message[0] if message else "problem reported by ruff"
            if is_syntax_error(code):
                if item.path in syntax_reported:
                    continue  # later syntax errors usually follow from the first one
                syntax_reported.add(item.path)
                found.append(
                    finding(
                        item.path, line_no, Severity.BLOCKER, SYNTAX_RULE, f"Syntax error: {short}", line_text
                    )
                )
                continue
            assert code is not None
            suggestion = single_line_fix(diagnostic, row, line_text) if row in item.lines.added else None
            found.append(
                finding(
                    item.path,
                    line_no,
                    severity_for(code),
                    f"python/{code}",
                    f"{short} ({code})",
                    line_text,
                    suggestion=suggestion,
                )
            )
        return found
