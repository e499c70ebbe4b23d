"""Python files: ruff, run once over every analysed ``.py``/``.pyi`` file of the pull request.

The head contents are written at their repository paths under a fresh temporary directory and
ruff is run there (as a subprocess, no shell): it only parses them, nothing is executed. A
configuration file always sits at the root of that directory, so nothing outside it (the
server's own ``pyproject.toml``, a user config) can leak in: the repository's own ruff
configuration (``.ruff.toml``, ``ruff.toml``, or ``pyproject.toml`` with a ``[tool.ruff]`` table,
at the repository root) when it has one, otherwise ours with ``select = ["E9", "F"]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..model import ChangedFile, FileContent, Finding, Severity, Skipped
from . import AnalysisInput, AnalyzerOutput, FileUnderReview, finding, is_python

__all__ = [
    "CONFIG_CANDIDATES",
    "DEFAULT_SELECT",
    "SYNTAX_RULE",
    "PythonAnalyzer",
    "RuffConfig",
    "RuffError",
    "RuffUnavailableError",
    "find_ruff",
    "repo_ruff_config",
    "run_ruff",
    "severity_for",
]

log = logging.getLogger(__name__)

SYNTAX_RULE = "python/syntax-error"
DEFAULT_SELECT = ("E9", "F")
RUFF_TIMEOUT = 60.0
# In ruff's own order of precedence within a directory.
CONFIG_CANDIDATES = (".ruff.toml", "ruff.toml", "pyproject.toml")

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BLOCKER_CODES = frozenset({"F821", "F822", "F823"})
_CONCERN_CODES = frozenset(
    {"F811", "F632", "F702", "F704", "F706", "F707", "F722", "F601", "F602", "F631"}
    | {f"F{n}" for n in range(502, 510)}
    | {f"F{n}" for n in range(521, 526)}
)


class RuffError(RuntimeError):
    """ruff ran but did not produce a usable result."""


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


@dataclass(frozen=True, slots=True)
class RuffConfig:
    name: str  # file name to write at the temp dir's root
    text: str


def repo_ruff_config(contents: Mapping[str, FileContent | None]) -> tuple[RuffConfig | None, str | None]:
    """The repository's root ruff configuration, if any usable one exists, and otherwise why
    not (``None`` when there simply is none)."""
    for name in CONFIG_CANDIDATES:
        content = contents.get(name)
        if content is None or content.text is None:
            continue
        try:
            data = tomllib.loads(content.text)
        except tomllib.TOMLDecodeError as exc:
            if name == "pyproject.toml" and "[tool.ruff" not in content.text:
                continue
            return None, f"`{name}` is not valid TOML ({exc})"
        if name == "pyproject.toml":
            tool = data.get("tool")
            table = tool.get("ruff") if isinstance(tool, dict) else None
            if not isinstance(table, dict):
                continue  # ruff ignores a pyproject.toml without [tool.ruff]
        else:
            table = data
        if "extend" in table:
            # It points at a file we do not have (and must not look for outside the temp dir).
            return None, f"`{name}` extends another configuration file"
        return RuffConfig(name, content.text), None
    return None, None


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


def _prepare(tmp: str, files: Mapping[str, str], config: RuffConfig | None) -> tuple[Path, list[str]]:
    """Write the configuration at the root of ``tmp`` and every file at its repository path
    below it; the resolved root and the paths to pass to ruff."""
    root = Path(tmp).resolve()
    if config is not None:
        (root / config.name).write_text(config.text, encoding="utf-8")
    else:
        select = ", ".join(f'"{code}"' for code in DEFAULT_SELECT)
        (root / "ruff.toml").write_text(f"[lint]\nselect = [{select}]\n", encoding="utf-8")
    for path, text in files.items():
        if _safe_relative(path) is None:
            raise RuffError(f"refusing to write {path!r} outside the temporary directory")
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
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


async def run_ruff(
    files: Mapping[str, str],
    config: RuffConfig | None,
    *,
    time_limit: float = RUFF_TIMEOUT,
    command: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Lint ``files`` (repository path -> text) in ONE ruff invocation; ruff's JSON diagnostics,
    with ``filename`` rewritten to the repository path. Paths must be safe relative paths."""
    if not files:
        return []
    cmd = list(command) if command is not None else find_ruff()
    with tempfile.TemporaryDirectory(prefix="revbot-ruff-") as tmp:
        root, relative = await asyncio.to_thread(_prepare, tmp, files, config)
        args = [*cmd, "check", "--output-format", "json", "--no-cache", "--exit-zero", "--no-fix"]
        if config is None:
            args += ["--select", ",".join(DEFAULT_SELECT)]
        else:
            args.append("--force-exclude")  # the repository's own excludes apply
        args += ["--", *relative]
        try:
            process = await asyncio.create_subprocess_exec(
                *args,
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
            detail = " ".join(stderr.decode(errors="replace").split())
            raise RuffError(f"ruff exited with status {process.returncode}: {detail[:300]}")
        return _parse_output(stdout, root)


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


class PythonAnalyzer:
    name = "python"

    def __init__(self, *, time_limit: float = RUFF_TIMEOUT, command: Sequence[str] | None = None) -> None:
        self.time_limit = time_limit
        self.command = command

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        python = [f.path for f in files if is_python(f.path)]
        return [*python, *CONFIG_CANDIDATES] if python else []

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        out = AnalyzerOutput()
        targets: dict[str, FileUnderReview] = {}
        texts: dict[str, str] = {}
        for item in batch.files:
            if not is_python(item.path):
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

        config, problem = repo_ruff_config(batch.contents)
        if problem is not None:
            out.notes.append(f"the repository's ruff configuration was not used: {problem}")
        try:
            diagnostics = await run_ruff(texts, config, time_limit=self.time_limit, command=self.command)
        except RuffUnavailableError:
            raise
        except RuffError as exc:
            if config is None:
                return self._failed(out, targets, str(exc))
            log.warning("ruff failed with the repository's configuration (%s); using the defaults", exc)
            out.notes.append(
                f"ruff rejected the repository's configuration `{config.name}`; default rules used instead"
            )
            try:
                diagnostics = await run_ruff(texts, None, time_limit=self.time_limit, command=self.command)
            except RuffUnavailableError:
                raise
            except RuffError as again:
                return self._failed(out, targets, str(again))
        out.findings.extend(self._findings(diagnostics, targets))
        return out

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
