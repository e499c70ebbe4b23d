"""Running the field's own linters (zizmor, shellcheck, hadolint) on a pull request's files.

Each runs inside the execution boundary (``isolation``), as ruff does (``ruff_runner``): the files
it lints are written at their repository paths under a fresh temporary directory, with the
configuration it may read (the repository's, re-written by ``toolconfig`` with what would reach
outside the tree left out, else ours), and it runs there with a time limit, its standard output
read up to a cap and its standard error never read at all: nothing it writes there is posted.
A program that is not installed is a note for the summary, never a crash (``find_tool``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.model import Finding, Severity, Skipped
from .base import AnalysisInput, AnalyzerOutput, FileUnderReview, safe_relative, unreadable
from .suppressions import suppressed_by_pull_request, without_added_directives

__all__ = [
    "LEVELS",
    "MAX_INPUT_BYTES",
    "MAX_OUTPUT_BYTES",
    "TOOL_TIMEOUT",
    "Tool",
    "ToolError",
    "collect",
    "command_for",
    "find_tool",
    "readable",
    "run_tool",
    "tool_tree",
    "unavailable",
]

TOOL_TIMEOUT = 60.0
MAX_OUTPUT_BYTES = 8 * 1024 * 1024
MAX_INPUT_BYTES = 1024 * 1024  # a larger script or Dockerfile is not linted (and said so)
# shellcheck's and hadolint's levels: nothing they say blocks a merge by itself.
LEVELS = {"error": Severity.CONCERN, "warning": Severity.CONCERN, "info": Severity.NIT, "style": Severity.NIT}


@dataclass(frozen=True, slots=True)
class Tool:
    """An external linter: its program, the package that ships it, and what it checks."""

    program: str
    package: str
    checks: str  # "shell scripts"

    def missing(self) -> str:
        return (
            f"{self.program} is not installed, so {self.checks} were not checked "
            f"(pip install {self.package} into the bot's environment: `python -m app doctor` says which)"
        )


class ToolError(RuntimeError):
    """The linter ran but gave no usable answer. The message is ours, never the tool's stderr."""


def find_tool(program: str) -> list[str] | None:
    """The command that runs ``program``: next to this interpreter (where pip puts the wheel's
    binary), else on PATH; None when neither has it."""
    candidate = Path(sys.executable).parent / program
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return [str(candidate)]
    on_path = shutil.which(program)
    return [on_path] if on_path else None


def command_for(tool: Tool, given: Sequence[str] | None, batch: AnalysisInput) -> list[str] | None:
    """The command that runs ``tool``: the analyzer's own, else the one the serving process found
    (``AnalysisInput.tools``), else one found here; None when it is not installed."""
    if given is None:
        given = batch.tools.get(tool.program)
    return list(given) if given is not None else find_tool(tool.program)


def readable(item: FileUnderReview, tool: Tool) -> str | None:
    """Why ``tool`` cannot lint this file, or None."""
    reason = unreadable(item)
    if reason is None and item.text is not None and len(item.text.encode()) > MAX_INPUT_BYTES:
        return f"larger than {MAX_INPUT_BYTES // (1024 * 1024)} MB, the limit for {tool.program}"
    return reason


def collect(
    batch: AnalysisInput,
    tool: Tool,
    out: AnalyzerOutput,
    wanted: Callable[[str], bool],
    accept: Callable[[str, str], bool] = lambda path, text: True,
) -> dict[str, FileUnderReview]:
    """The changed files ``tool`` lints (by path, then by content), the repository's excludes
    applied; a file it cannot lint is skipped and makes the analysis incomplete."""
    targets: dict[str, FileUnderReview] = {}
    for item in batch.files:
        if not wanted(item.path) or not batch.linted(item):
            continue
        if item.text is not None and not accept(item.path, item.text):
            continue
        reason = readable(item, tool)
        if reason is not None:
            out.skipped.append(Skipped(item.path, f"{tool.program} not run: {reason}"))
            out.incomplete = True
            continue
        targets[item.path] = item
    return targets


def unavailable(out: AnalyzerOutput, paths: Sequence[str], why: str, tool: Tool) -> AnalyzerOutput:
    """These files were not checked by ``tool``: a note, a skip each, and never an approval."""
    out.incomplete = True
    out.notes.append(why)
    out.skipped.extend(Skipped(path, f"{tool.program} not run: {why}") for path in paths)
    return out


async def added_suppressions(
    targets: Mapping[str, FileUnderReview],
    found: Sequence[Finding],
    directive: re.Pattern[str],
    lint: Callable[[Mapping[str, str]], Awaitable[list[Finding]]],
    out: AnalyzerOutput,
) -> None:
    """The tool again on the files where the pull request added one of its ``directive``s, with
    those made inert (``suppressions``): what only they hid, on added lines, is a finding when it
    is a blocker, else listed as suppressed. Its own directives the bot cannot check: incomplete."""
    rewritten = {
        path: text
        for path, item in targets.items()
        if (text := without_added_directives(item.text or "", item.lines.added_text, directive)) is not None
    }
    if not rewritten:
        return
    try:
        again = await lint(rewritten)
    except ToolError as exc:
        out.incomplete = True
        out.notes.append(f"the pull request's own suppressions could not be checked ({exc})")
        return
    seen = {(f.path, f.rule, f.line) for f in found}
    for hidden in again:
        if (hidden.path, hidden.rule, hidden.line) in seen or hidden.line not in targets[
            hidden.path
        ].lines.added:
            continue
        flagged = suppressed_by_pull_request(hidden, "a directive it added")
        if flagged is not None:
            out.findings.append(flagged)
        else:
            out.suppressed.append(hidden)


def _write_tree(tmp: str, files: Mapping[str, str]) -> Path:
    root = Path(tmp).resolve()
    for path, text in files.items():
        if safe_relative(path) is None:
            raise ToolError(f"refusing to write {path!r} outside the temporary directory")
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
    return root


@contextlib.asynccontextmanager
async def tool_tree(files: Mapping[str, str]) -> AsyncIterator[Path]:
    """A fresh temporary directory holding ``files`` (repository path -> text) at their paths."""
    with tempfile.TemporaryDirectory(prefix="revbot-lint-") as tmp:
        yield await asyncio.to_thread(_write_tree, tmp, files)


async def run_tool(
    command: Sequence[str],
    root: Path,
    *,
    ok: frozenset[int] = frozenset({0}),
    time_limit: float = TOOL_TIMEOUT,
    max_output: int = MAX_OUTPUT_BYTES,
) -> bytes:
    """Run ``command`` in ``root`` with no input and a private home; its standard output, when it
    exits with a status in ``ok`` within ``time_limit`` and writes at most ``max_output`` bytes."""
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root),  # no user configuration of the host is found there
        "XDG_CONFIG_HOME": str(root / ".config"),
        "XDG_CACHE_HOME": str(root / ".cache"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }
    name = Path(command[0]).name
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=root,
            env=environment,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError as exc:
        raise ToolError(f"{name} could not be started ({type(exc).__name__})") from None
    assert process.stdout is not None
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(time_limit):
            while chunk := await process.stdout.read(65536):
                size += len(chunk)
                if size > max_output:
                    raise ToolError(f"{name} wrote more than {max_output // (1024 * 1024)} MB")
                chunks.append(chunk)
            await process.wait()
    except TimeoutError:
        raise ToolError(f"{name} took longer than {time_limit:g} s") from None
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    if process.returncode not in ok:
        raise ToolError(f"{name} exited with status {process.returncode}")
    return b"".join(chunks)
