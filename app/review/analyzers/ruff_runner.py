"""Running ruff: once over a set of files, in a directory that looks like a checkout.

Under a fresh temporary directory go the files to lint at their repository paths, the
configuration files (already re-written by ``ruffinputs.ruff_inputs``) and the package layout
(empty stand-ins). A configuration always sits at its root (the repository's, or ours with
``select = ["E9", "F"]``), so nothing outside it can leak in. What ruff writes on stderr is never
passed on: only the name of a setting it does not know. The analyzer is ``python``; the pinned
versions are installed by ``review/engine/ruffpins.py``.
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
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.lintconfig import RUFF_CONFIGS, version_tuple
from ..core.refusals import TOMLDecodeError, load_toml
from .base import safe_relative

__all__ = [
    "DEFAULT_SELECT",
    "RUFF_TIMEOUT",
    "RuffError",
    "RuffUnavailableError",
    "find_ruff",
    "ruff_rule_since",
    "ruff_version",
    "run_ruff",
    "safe_relative",
]

DEFAULT_SELECT = ("E9", "F")
RUFF_TIMEOUT = 60.0
DEFAULT_CONFIG = f"[lint]\nselect = [{', '.join(repr(code) for code in DEFAULT_SELECT)}]\n"
_UNKNOWN_FIELD = re.compile(r"unknown field `([A-Za-z0-9_-]+)`")
MAX_LAYOUT_FILES = 50_000  # stand-ins written for the package layout; beyond this, __init__.py only
# ruff runs one analyzer may spend finding the files that crash it (halving them each time)
MAX_RUFF_RUNS = 16


class RuffError(RuntimeError):
    """ruff ran but did not produce a usable result. The message is ours, never ruff's stderr;
    ``unknown_field`` is the one thing read from it: a setting this ruff does not know.
    ``crashed``: it died of a signal or ran out of time (what one file can do to it), rather than
    refusing its input (a configuration it rejects refuses every file alike)."""

    def __init__(self, message: str, *, unknown_field: str | None = None, crashed: bool = False) -> None:
        super().__init__(message)
        self.unknown_field = unknown_field
        self.crashed = crashed


class RuffUnavailableError(RuffError):
    """ruff is not installed next to this Python: a deployment problem, not a review result."""


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
        "(pip install ruff into the bot's environment: `python -m app doctor` says which)"
    )


def _write(root: Path, path: str, text: str) -> None:
    if safe_relative(path) is None:
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
        tool = load_toml(text).get("tool")
    except TOMLDecodeError:
        return False
    return isinstance(tool, dict) and isinstance(tool.get("ruff"), dict)


def below_configs(paths: Iterable[str], configs: Mapping[str, str] | None) -> list[str]:
    """The paths ruff cannot be given beside ``configs`` (ours, ``.ruff.toml``, included): those
    below a directory named like a configuration file written at that place (``.ruff.toml/x.py``);
    the file and the configuration cannot both exist."""
    written = {*(configs or {}), ".ruff.toml"}
    return [path for path in paths if any(path.startswith(f"{config}/") for config in written)]


async def lint_in_parts(
    texts: Mapping[str, str],
    lint: Callable[[Mapping[str, str]], Awaitable[list[dict[str, Any]]]],
    *,
    max_runs: int = MAX_RUFF_RUNS,
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """ruff crashed on ``texts`` together: ``lint`` halves of them, then halves of the halves that
    crash it (``max_runs`` at most), so a file built to crash it costs only its own findings. The
    diagnostics of the parts that ran, and each file it still failed on, with the error."""
    diagnostics: list[dict[str, Any]] = []
    failed: dict[str, str] = {}
    paths = list(texts)
    parts, runs = [paths[: len(paths) // 2], paths[len(paths) // 2 :]], 0
    while parts:
        part = parts.pop()
        if not part:
            continue
        if runs >= max_runs:
            failed.update(dict.fromkeys(part, "not tried alone: ruff crashed too often"))
            continue
        runs += 1
        try:
            diagnostics += await lint({path: texts[path] for path in part})
        except RuffUnavailableError:
            raise
        except RuffError as exc:
            if len(part) == 1 or not exc.crashed:
                failed.update(dict.fromkeys(part, str(exc)))
            else:
                parts += [part[: len(part) // 2], part[len(part) // 2 :]]
    return diagnostics, failed


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
    blocked = set(below_configs(layout, configs))
    stand_ins = [
        p
        for p in layout
        if p not in files and p not in configs and p not in blocked and safe_relative(p) is not None
    ]
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
        raise RuffError(f"ruff timed out after {time_limit:g} s", crashed=True) from None
    if process.returncode != 0:
        unknown = _UNKNOWN_FIELD.search(stderr.decode(errors="replace"))
        raise RuffError(
            f"ruff exited with status {process.returncode}",
            unknown_field=unknown.group(1) if unknown else None,
            crashed=(process.returncode or 0) < 0,
        )
    return stdout


async def run_ruff(
    files: Mapping[str, str],
    configs: Mapping[str, str] | None,
    *,
    layout: Sequence[str] = (),
    time_limit: float = RUFF_TIMEOUT,
    command: Sequence[str] | None = None,
    ignore_noqa: bool = False,
) -> list[dict[str, Any]]:
    """Lint ``files`` (repository path -> text) in ONE ruff invocation (``ignore_noqa``: with
    every ``noqa`` directive ignored, ``suppressions``), with ``configs``
    (repository path -> text; None or no root config: ours at the root) and the ``layout`` (other
    repository paths, written empty); ruff's JSON diagnostics, with ``filename`` rewritten to the
    repository path. Paths must be safe relative paths."""
    if not files:
        return []
    cmd = list(command) if command is not None else find_ruff()
    with tempfile.TemporaryDirectory(prefix="revbot-ruff-") as tmp:
        root, relative = await asyncio.to_thread(_prepare, tmp, files, configs, layout)
        args = [*cmd, "check", "--output-format", "json", "--no-cache", "--exit-zero", "--no-fix"]
        args += ["--ignore-noqa"] if ignore_noqa else []
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
