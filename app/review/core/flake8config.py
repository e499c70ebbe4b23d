"""flake8's own configuration as lint scope, read at the base. Pure; runs inside the execution
boundary with the rest of the lint configuration (``lintconfig``).

Many Python repositories still lint with flake8 and say there what they do not lint: urllib3's
``setup.cfg`` had ``[flake8] exclude=./docs/conf.py,./src/urllib3/packages/*``, and a formatter
run over its vendored ``six.py`` is not a reason to report Python 2 names there.

- **Where.** The first of ``setup.cfg``, ``tox.ini`` and ``.flake8`` at the repository's root
  that has a ``[flake8]`` section, in flake8's own order (its CI runs from the root).
- **What.** ``exclude`` and ``extend-exclude`` (a path is left out when it or a directory above
  it matches, by its name or by its path from the root: flake8's ``fnmatch`` reading, where
  ``*`` crosses ``/`` and ``./`` means the root), ``filename`` (a Python file none of its
  patterns match is not linted), and ``per-file-ignores`` (``pattern: CODE, CODE``), which
  leave out the findings of ruff's rules whose codes are flake8's (``SAME_CODES``).
- **Bounds.** A file over ``MAX_BYTES`` or that ``configparser`` cannot read is a note, never an
  exception; a pattern with ``..``, an absolute path or over ``MAX_PATTERN_CHARS`` matches
  nothing; patterns run on RE2 (linear in the path). Everything else in the file is ignored.
"""

from __future__ import annotations

import configparser
import re
from collections.abc import Mapping
from dataclasses import dataclass

from .codespan import code_span
from .model import FileContent
from .patterns import MAX_PATTERN_CHARS, Matcher, compile_glob

__all__ = ["FLAKE8_CONFIGS", "SAME_CODES", "Flake8Config", "flake8_config"]

FLAKE8_CONFIGS = ("setup.cfg", "tox.ini", ".flake8")  # flake8's order in a directory
MAX_BYTES = 256 * 1024
NOT_APPLIED = "its flake8 excludes were not applied"
# The flake8 plugins whose codes ruff kept as they were: pyflakes, pycodestyle, mccabe,
# bugbear, comprehensions, simplify, debugger, print, naming, docstrings, bandit (flake8-bandit's
# S), pytest-style, quotes, builtins, annotations, unused-arguments, return, pie, eradicate,
# datetimez, implicit-str-concat, blind-except, boolean-trap, commas, errmsg, executable,
# logging-format, no-pep420, tidy-imports, 2020, async. Another plugin's codes mean something
# else in ruff (or nothing): its ignores are not carried over.
SAME_CODES = (
    "F", "E", "W", "C90", "B", "C4", "SIM", "T10", "T20", "N", "D", "S", "PT", "Q", "A", "ANN",
    "ARG", "RET", "PIE", "ERA", "DTZ", "ISC", "BLE", "FBT", "COM", "EM", "EXE", "G", "INP",
    "TID", "YTT", "ASYNC",
)  # fmt: skip
_CODE = re.compile(r"[A-Z]{1,3}[0-9]{0,3}")
_TOKEN = re.compile(r"[^\s,:]+|:")
_RUFF_CODE = re.compile(r"[A-Z]+[0-9]+")


def _glob(pattern: str) -> Matcher | None:
    """flake8's ``fnmatch`` pattern as RE2 (``*`` and ``?`` cross ``/``; ``[!...]`` negates)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            negate = body.startswith("!")
            body = re.sub(r"([\\\]^])", r"\\\1", body[1:] if negate else body)
            out.append(f"[{'^' if negate else ''}{body}]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return compile_glob("".join(out))


@dataclass(frozen=True, slots=True)
class Pattern:
    """One flake8 path pattern: a bare name matches a file or directory name anywhere; one with a
    ``/`` matches the path from the root."""

    text: str
    matcher: Matcher | None
    by_path: bool

    @classmethod
    def of(cls, raw: str) -> Pattern:
        text = raw.strip()
        cleaned = text.removeprefix("./")
        unsafe = (
            not cleaned
            or len(cleaned) > MAX_PATTERN_CHARS
            or cleaned.startswith("/")
            or ".." in cleaned.split("/")
        )
        return cls(text, None if unsafe else _glob(cleaned.rstrip("/")), "/" in cleaned)

    def matches(self, path: str) -> bool:
        """``path`` or a directory above it matches."""
        if self.matcher is None:
            return False
        parts = path.split("/")
        for depth in range(len(parts), 0, -1):
            subject = "/".join(parts[:depth]) if self.by_path else parts[depth - 1]
            if self.matcher(subject):
                return True
        return False


def _patterns(value: str | None) -> tuple[Pattern, ...]:
    if not value:
        return ()
    return tuple(Pattern.of(p) for p in re.split(r"[,\s]+", value) if p.strip())


def _per_file(value: str | None) -> tuple[tuple[Pattern, tuple[str, ...]], ...]:
    """``per-file-ignores``: names, a colon, then codes; as flake8 tokenises it (commas and
    whitespace separate, a name that looks like a code after the colon is a code)."""
    out: list[tuple[Pattern, tuple[str, ...]]] = []
    names: list[str] = []
    codes: list[str] = []
    after_colon = False
    for token in _TOKEN.findall(value or ""):
        if token == ":":
            after_colon = True
        elif after_colon and _CODE.fullmatch(token):
            codes.append(token)
        else:
            if after_colon:
                out += [(Pattern.of(name), tuple(codes)) for name in names]
                names, codes, after_colon = [], [], False
            names.append(token)
    if after_colon:
        out += [(Pattern.of(name), tuple(codes)) for name in names]
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Flake8Config:
    source: str  # the file that holds the section
    exclude: tuple[Pattern, ...] = ()
    filename: tuple[Pattern, ...] = ()
    per_file_ignores: tuple[tuple[Pattern, tuple[str, ...]], ...] = ()

    def excluded(self, path: str) -> str | None:
        """The pattern (or ``filename``) that leaves ``path`` out of flake8's linting, or None."""
        for pattern in self.exclude:
            if pattern.matches(path):
                return pattern.text
        if self.filename and path.endswith(".py") and not any(p.matches(path) for p in self.filename):
            return "filename: " + ",".join(p.text for p in self.filename)
        return None

    def ignores(self, path: str, code: str) -> bool:
        """Whether ``per-file-ignores`` leaves out ruff's ``code`` on ``path`` (flake8's codes
        match by prefix; only the families ``SAME_CODES`` names carry over)."""
        if not _RUFF_CODE.fullmatch(code) or not any(code.startswith(prefix) for prefix in SAME_CODES):
            return False
        return any(
            pattern.matches(path) and any(code.startswith(c) for c in codes)
            for pattern, codes in self.per_file_ignores
        )


def flake8_config(contents: Mapping[str, FileContent | None]) -> tuple[Flake8Config | None, str | None]:
    """The ``[flake8]`` section flake8 would read at the root, and a note when one could not be
    read (None, None: there is none)."""
    for path in FLAKE8_CONFIGS:
        content = contents.get(path)
        if content is None or content.text is None or "[flake8]" not in content.text:
            continue
        if len(content.text.encode()) > MAX_BYTES:
            return (
                None,
                f"{code_span(path)} was not read (over {MAX_BYTES // 1024} KB): {NOT_APPLIED}",
            )
        parser = configparser.RawConfigParser(strict=False, default_section="\0")
        try:
            parser.read_string(content.text, source=path)
            section = parser["flake8"]
        except (configparser.Error, KeyError, UnicodeError) as exc:
            problem = " ".join(str(exc).split())[:120]
            return (
                None,
                f"{code_span(path)} could not be read ({code_span(problem)}): {NOT_APPLIED}",
            )
        options = {key.replace("_", "-"): value for key, value in section.items()}
        return (
            Flake8Config(
                source=path,
                exclude=_patterns(options.get("exclude")) + _patterns(options.get("extend-exclude")),
                filename=_patterns(options.get("filename")),
                per_file_ignores=_per_file(options.get("per-file-ignores")),
            ),
            None,
        )
    return None, None
