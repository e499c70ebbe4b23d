"""Debugging leftovers in added lines.

Python: ``breakpoint()`` and ``pdb``/``ipdb`` (concerns), ``print(`` in library code (a concern:
it runs at import or on every request; not in tests, docs, scripts, demos, ``__main__``, entry
points, CLI modules, or a module that already prints elsewhere or printed at the base; a nit when
a file gains three or more, which looks like output on purpose). ``# noqa``, bare or with the
matching ruff code (``T201``/``T203`` for print, ``T100`` for debuggers, or a prefix of it),
silences them as it silences ruff. Files the repository does not lint (``lintconfig``) are left
alone. JavaScript and friends: ``debugger`` (a concern) and ``console.log(`` (a nit). Comments and
string literals do not count: for Python files whose content was read, the tokenizer tells code
from strings (docstrings included); otherwise, and for JavaScript, a one-line approximation does.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Collection, Mapping, Sequence
from pathlib import PurePosixPath

from ..core.model import ChangedFile, Finding, RepoTree, Severity
from ..core.refusals import EXHAUSTED
from .base import (
    AnalysisInput,
    AnalyzerOutput,
    FileUnderReview,
    Rule,
    finding,
    is_js,
    is_python,
    is_test_path,
)
from .base import strip_python_noise as _strip_python_line

__all__ = [
    "DebugAnalyzer",
    "is_action_script",
    "is_print_exempt",
    "noqa_silences",
    "python_code_view",
    "standing_actions",
    "strip_js_noise",
]

_BREAKPOINT = re.compile(r"(?<![\w.])(?<!def )breakpoint\s*\(")
_PDB = re.compile(
    r"(?<![\w.])i?pdb\s*\.\s*set_trace\s*\(|^\s*import\s+(?:[\w.]+\s*,\s*)*i?pdb\b(?!\.)|^\s*from\s+i?pdb\s+import\b"
    r"|;\s*import\s+i?pdb\b"
)
_PRINT = re.compile(r"(?<![\w.])(?<!def )print\s*\(")
_ONLY_DEBUG_CALL = re.compile(
    r"^\s*(?:breakpoint\s*\(\s*\)|(?:import\s+i?pdb\s*;\s*)?i?pdb\s*\.\s*set_trace\s*\(\s*\))\s*;?\s*$"
)
_CONSOLE_LOG = re.compile(r"(?<![\w.$])console\s*\.\s*log\s*\(")
_DEBUGGER = re.compile(r"(?<![\w.$])debugger\s*;|^\s*debugger\s*$")
_JS_STRING = re.compile(r"""'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|`(?:[^`\\\n]|\\.)*`""")
_MAIN_GUARD = re.compile(r"""^if\s+__name__\s*==\s*["']__main__["']\s*:""", re.MULTILINE)
# A print whose text is a workflow command (``::set-output``, ``::error::``, ``::group::``): the
# Action's output by design. Only that print is exempt: text elsewhere in a file never exempts it.
_WORKFLOW_COMMAND = re.compile(r"""print\(\s*[rbfRBF]*["']::[a-z-]+""")
_ACTION_FILES = ("action.yml", "action.yaml")

_PRINT_EXEMPT_DIRS = frozenset(
    {
        "scripts",
        "script",
        "bin",
        "tools",
        "examples",
        "example",
        "docs",
        "doc",
        "cli",
        "commands",
        "benchmarks",
        "demo",
        "demos",
    }
)
_PRINT_EXEMPT_NAMES = frozenset(
    {"__main__.py", "setup.py", "manage.py", "noxfile.py", "tasks.py", "conf.py", "fabfile.py", "cli.py"}
)
# This many prints added to one file look like a module whose job is output, not a leftover.
OUTPUT_MODULE_PRINTS = 3
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]*(?:\s*,?\s*[A-Z]+[0-9]*)*))?", re.IGNORECASE)
# The ruff (flake8-debugger, flake8-print) codes that stand for the bot's own Python rules.
NOQA_CODES = {"debug/print": ("T201", "T203"), "debug/breakpoint": ("T100",), "debug/pdb": ("T100",)}


def noqa_silences(line: str, rule: str) -> bool:
    """A ``# noqa`` comment on the line covers ``rule``: bare, or naming its ruff code (or a prefix
    of that code, as flake8 allows)."""
    match = _NOQA.search(line)
    if match is None:
        return False
    codes = match.group("codes")
    if not codes:
        return True
    named = [code.upper() for code in re.split(r"[\s,]+", codes) if code]
    return any(code.startswith(given) for code in NOQA_CODES.get(rule, ()) for given in named)


def is_print_exempt(path: str) -> bool:
    """Where ``print`` is the point: tests, scripts, entry points, anything under ``.github/``
    (a workflow's or an action's script, whose output is the workflow's log) (by path alone)."""
    parts = PurePosixPath(path).parts
    return (
        is_test_path(path)
        or (bool(parts) and parts[0] == ".github")
        or any(part in _PRINT_EXEMPT_DIRS for part in parts[:-1])
        or (bool(parts) and parts[-1] in _PRINT_EXEMPT_NAMES)
    )


def standing_actions(tree: RepoTree | None, changed: Sequence[ChangedFile]) -> frozenset[str]:
    """The ``action.yml`` files of the tree the pull request did not create (add, copy or rename
    into place): one it creates never exempts the prints below it, or adding one would silence
    every print of the repository."""
    if tree is None:
        return frozenset()
    created = {f.path for f in changed if f.status in ("added", "copied", "renamed")}
    return frozenset(p for p in tree.files if PurePosixPath(p).name in _ACTION_FILES and p not in created)


def is_action_script(path: str, actions: Collection[str]) -> bool:
    """A GitHub Action's script, whose prints are its output: a directory on its path holds one
    of ``actions`` (``standing_actions``: a composite or Docker action's sources). Known from the
    tree, not the text."""
    parts = path.split("/")[:-1]
    directories = ["/".join(parts[:depth]) for depth in range(len(parts), -1, -1)]
    return any((f"{d}/{name}" if d else name) in actions for d in directories for name in _ACTION_FILES)


def python_code_view(text: str) -> dict[int, str] | None:
    """Line number -> the line with comments and string literals (docstrings included) blanked
    out, from the tokenizer; None when the file does not tokenize."""
    lines = io.StringIO(text).readlines()  # the tokenizer's own idea of lines
    view = [list(line.rstrip("\r\n")) for line in lines]
    blank = {tokenize.COMMENT, tokenize.STRING}
    blank |= {getattr(tokenize, name) for name in ("FSTRING_MIDDLE",) if hasattr(tokenize, name)}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type not in blank:
                continue
            (start_row, start_col), (end_row, end_col) = token.start, token.end
            for row in range(start_row, end_row + 1):
                if row - 1 >= len(view):
                    break
                chars = view[row - 1]
                first = start_col if row == start_row else 0
                last = end_col if row == end_row else len(chars)
                for col in range(first, min(last, len(chars))):
                    chars[col] = " "
    except (tokenize.TokenError, IndentationError, SyntaxError, *EXHAUSTED):
        return None
    return {number: "".join(chars) for number, chars in enumerate(view, start=1)}


def strip_js_noise(line: str) -> str:
    stripped = line.lstrip()
    if stripped.startswith(("*", "/*", "<!--")):
        return ""
    code = _JS_STRING.sub('""', line)
    comment = code.find("//")
    return code if comment < 0 else code[:comment]


def _would_empty_a_block(code: Mapping[int, str], number: int) -> bool:
    """Deleting line ``number`` would leave the block it sits in with no statement."""
    before = [n for n in range(number - 1, 0, -1) if code.get(n, "").strip()]
    if not before or not code[before[0]].rstrip().endswith(":"):
        return False
    opener_indent = len(code[before[0]]) - len(code[before[0]].lstrip())
    after = next((n for n in range(number + 1, max(code) + 1) if code.get(n, "").strip()), None)
    if after is None:
        return True
    return len(code[after]) - len(code[after].lstrip()) <= opener_indent


class DebugAnalyzer:
    name = "debug"
    tools: tuple[str, ...] = ()
    differential: bool = False  # its own rules already weigh what the PR added against the rest
    rules: tuple[Rule, ...] = (
        Rule("debug/breakpoint", Severity.CONCERN, "a `breakpoint()` call added outside tests"),
        Rule("debug/pdb", Severity.CONCERN, "a `pdb`/`ipdb` import or `set_trace()` added outside tests"),
        Rule(
            "debug/print", Severity.CONCERN, "a `print()` added outside tests (a nit in a module that prints)"
        ),
        Rule("debug/debugger", Severity.CONCERN, "a JavaScript `debugger` statement added outside tests"),
        Rule("debug/console-log", Severity.NIT, "a `console.log()` added outside tests"),
    )

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        return []  # uses Python contents when another analyzer had them read, never asks for them

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        findings: list[Finding] = []
        actions = standing_actions(batch.tree, [i.file for i in (*batch.files, *batch.unpatched)])
        for item in batch.files:
            if not batch.linted(item):
                continue
            if is_python(item.path):
                base = batch.base.get(item.file.previous_path or item.path)
                findings.extend(
                    f
                    for f in self._python(item, base.text if base is not None else None, actions)
                    if not noqa_silences(item.lines.added_text[f.line], f.rule)
                )
            elif is_js(item.path):
                findings.extend(self._js(item))
        return AnalyzerOutput(findings=findings)

    def _python(self, item: FileUnderReview, base: str | None, actions: Collection[str]) -> list[Finding]:
        """``base``: the file's text at the base, when the engine has it (a module that printed
        there prints on purpose, however much of it the pull request rewrote)."""
        text = item.text
        view = python_code_view(text) if text is not None else None
        prints_allowed = (
            is_print_exempt(item.path) or item.path.endswith(".pyi") or is_action_script(item.path, actions)
        )
        if text is not None and _MAIN_GUARD.search(text):
            prints_allowed = True  # a CLI module
        if view is not None and any(
            _PRINT.search(line) for number, line in view.items() if number not in item.lines.added
        ):
            prints_allowed = True  # the module already writes to the terminal: that is its job
        base_view = python_code_view(base) if base is not None and not prints_allowed else None
        if base_view is not None and any(_PRINT.search(line) for line in base_view.values()):
            prints_allowed = True  # it did at the base: a formatter rewrote every print line
        added_prints = sum(
            1
            for number, raw in item.lines.added_text.items()
            if _PRINT.search(view.get(number, "") if view is not None else _strip_python_line(raw))
        )
        print_severity = Severity.NIT if added_prints >= OUTPUT_MODULE_PRINTS else Severity.CONCERN
        out: list[Finding] = []
        for number, raw in sorted(item.lines.added_text.items()):
            code = view.get(number, "") if view is not None else _strip_python_line(raw)
            if _BREAKPOINT.search(code):
                out.append(
                    finding(
                        item.path,
                        number,
                        Severity.CONCERN,
                        "debug/breakpoint",
                        "`breakpoint()` left in: it stops the program waiting for a debugger.",
                        raw,
                        suggestion=self._deletion(raw, number, view),
                    )
                )
            if _PDB.search(code):
                out.append(
                    finding(
                        item.path,
                        number,
                        Severity.CONCERN,
                        "debug/pdb",
                        "Debugger (`pdb`/`ipdb`) left in.",
                        raw,
                        suggestion=self._deletion(raw, number, view),
                    )
                )
            if not prints_allowed and _PRINT.search(code) and not _WORKFLOW_COMMAND.search(raw):
                out.append(
                    finding(
                        item.path,
                        number,
                        print_severity,
                        "debug/print",
                        "`print()` in library code, which runs at import or on every call: use logging, or "
                        "remove it"
                        + (
                            " (or, if this module is meant to write to the terminal, ignore this)."
                            if print_severity is Severity.NIT
                            else "."
                        ),
                        raw,
                    )
                )
        return out

    @staticmethod
    def _deletion(raw: str, number: int, view: Mapping[int, str] | None) -> str | None:
        code = view.get(number, raw) if view is not None else _strip_python_line(raw)
        if not _ONLY_DEBUG_CALL.match(code):
            return None
        if view is not None and _would_empty_a_block(view, number):
            return None
        return ""

    @staticmethod
    def _js(item: FileUnderReview) -> list[Finding]:
        out: list[Finding] = []
        for number, raw in sorted(item.lines.added_text.items()):
            code = strip_js_noise(raw)
            if _DEBUGGER.search(code):
                out.append(
                    finding(
                        item.path,
                        number,
                        Severity.CONCERN,
                        "debug/debugger",
                        "`debugger` statement left in.",
                        raw,
                    )
                )
            if _CONSOLE_LOG.search(code):
                out.append(
                    finding(
                        item.path,
                        number,
                        Severity.NIT,
                        "debug/console-log",
                        "`console.log` left in.",
                        raw,
                    )
                )
        return out
