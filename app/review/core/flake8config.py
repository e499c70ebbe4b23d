"""flake8's own configuration as lint scope, read at the base. Pure; runs inside the execution
boundary with the rest of the lint configuration (``lintconfig``).

Many Python repositories still lint with flake8 and say there what they do not lint: urllib3's
``setup.cfg`` had ``[flake8] exclude=./docs/conf.py,./src/urllib3/packages/*``, and a formatter
run over its vendored ``six.py`` is not a reason to report Python 2 names there.

- **Where.** The first of ``setup.cfg``, ``tox.ini`` and ``.flake8`` at the repository's root
  that has a ``[flake8]`` (or ``[flake8:local-plugins]``) section, in flake8's own order (its CI
  runs from the root); one ``configparser`` cannot read is passed over, as flake8 does.
- **What.** ``exclude`` and ``extend-exclude`` (a path is left out when it or a directory above
  it matches, by its name or by its path from the root: flake8's ``fnmatch`` reading, where
  ``*`` crosses ``/`` and ``./`` means the root), ``filename`` (a Python file none of its
  patterns match, by its name or its path, is not linted), and ``per-file-ignores``
  (``pattern: CODE, CODE``; the file itself matches, by name or path, and of the entries that
  match only the most specific applies, as flake8 picks the longest pattern), which leave out
  the findings of ruff's rules whose codes are flake8's (``SAME_CODES``).
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
# The flake8 plugins whose codes ruff kept as they were: pyflakes (F), pycodestyle (E, W),
# mccabe (C901), bugbear (B), comprehensions (C4), simplify (SIM), debugger (T100), print (T201),
# pep8-naming (N), docstrings (D), bandit (S), pytest-style (PT), quotes (Q), builtins (A),
# annotations (ANN), unused-arguments (ARG), pie (PIE), datetimez (DTZ), implicit-str-concat
# (ISC), boolean-trap (FBT), errmsg (EM), executable (EXE), logging-format (G), no-pep420 (INP),
# 2020 (YTT), async (ASYNC), use-pathlib (PTH). Ruff renamed others (flake8-return's R5xx is
# RET5xx, eradicate's E800 ERA001, commas' C81x COM81x, tidy-imports' I25x TID25x, blind-except's
# B902 BLE001) and another plugin's codes mean something else in ruff, or nothing: their ignores
# are not carried over.
SAME_CODES = (
    "F", "E", "W", "C90", "B", "C4", "SIM", "T10", "T20", "N", "D", "S", "PT", "Q", "A", "ANN",
    "ARG", "PIE", "DTZ", "ISC", "FBT", "EM", "EXE", "G", "INP", "YTT", "ASYNC", "PTH",
)  # fmt: skip
_CODE = re.compile(r"[A-Z]+[0-9]*")  # flake8's own tokeniser
_TOKEN = re.compile(r"[^\s,:]+|:")
_RUFF_CODE = re.compile(r"([A-Z]+)([0-9]+)")


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
    cleaned: str = ""  # without ``./`` nor a final ``/``: its length ranks per-file-ignores

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
        cleaned = cleaned.rstrip("/")
        return cls(text, None if unsafe else _glob(cleaned), "/" in text, cleaned)

    def matches(self, path: str) -> bool:
        """``path`` or a directory above it matches (flake8 does not walk into an excluded one)."""
        parts = path.split("/")
        return any(self.names("/".join(parts[:depth])) for depth in range(len(parts), 0, -1))

    def names(self, path: str) -> bool:
        """``path`` itself matches: by its name, or by its path from the root (what flake8 asks
        of a file for ``filename`` and ``per-file-ignores``)."""
        if self.matcher is None:
            return False
        return self.matcher(path if self.by_path else path.rpartition("/")[2])

    @property
    def specificity(self) -> tuple[bool, int]:
        """flake8 applies the longest matching ``per-file-ignores`` pattern once made absolute:
        one with a ``/`` (the checkout's directory before it) outranks a bare name."""
        return self.by_path, len(self.cleaned)


def _patterns(value: str | None) -> tuple[Pattern, ...]:
    if not value:
        return ()
    return tuple(Pattern.of(p) for p in re.split(r"[,\s]+", value) if p.strip())


def _per_file(value: str | None) -> tuple[tuple[Pattern, tuple[str, ...]], ...]:
    """``per-file-ignores``: names, a colon, then codes; as flake8 tokenises it (commas and
    whitespace separate, a name that looks like a code after the colon is a code; names with no
    code are dropped)."""
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
                out += [(Pattern.of(name), tuple(codes)) for name in names if codes]
                names, codes, after_colon = [], [], False
            names.append(token)
    if after_colon:
        out += [(Pattern.of(name), tuple(codes)) for name in names if codes]
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
        if self.filename and path.endswith(".py") and not any(p.names(path) for p in self.filename):
            return "filename: " + ",".join(p.text for p in self.filename)
        return None

    def ignores(self, path: str, code: str) -> bool:
        """Whether ``per-file-ignores`` leaves out ruff's ``code`` on ``path``: the most specific
        entry matching the file (flake8's choice, ``Pattern.specificity``; the first of equals)
        names a prefix of it, and ruff's code is flake8's (its family is in ``SAME_CODES``)."""
        if not _same_code(code):
            return False
        matching = [entry for entry in self.per_file_ignores if entry[0].names(path)]
        if not matching:
            return False
        _, codes = max(matching, key=lambda entry: entry[0].specificity)
        return any(code.startswith(c) for c in codes)


def _same_code(code: str) -> bool:
    """Whether ruff's ``code`` is a code of a flake8 plugin too: its letters are one family's
    (``E`` is pycodestyle's, ``ERA`` is not), its digits start with the family's."""
    parsed = _RUFF_CODE.fullmatch(code)
    if parsed is None:
        return False
    letters, digits = parsed.groups()
    return any(
        family.rstrip("0123456789") == letters and digits.startswith(family[len(letters) :])
        for family in SAME_CODES
    )


def flake8_config(contents: Mapping[str, FileContent | None]) -> tuple[Flake8Config | None, str | None]:
    """The ``[flake8]`` section flake8 would read at the root, and a note when a candidate could
    not be read (None, None: there is none). flake8 passes over a file ``configparser`` cannot
    read and takes the next; so does this."""
    note: str | None = None
    for path in FLAKE8_CONFIGS:
        content = contents.get(path)
        if content is None or content.text is None or "[flake8" not in content.text:
            continue
        if len(content.text.encode()) > MAX_BYTES:  # flake8 would read it: what it says is unknown
            return None, f"{code_span(path)} was not read (over {MAX_BYTES // 1024} KB): {NOT_APPLIED}"
        parser = configparser.RawConfigParser(strict=False, default_section="\0")
        try:
            parser.read_string(content.text, source=path)
        except (configparser.Error, ValueError) as exc:
            problem = " ".join(str(exc).split())[:120]
            note = note or f"{code_span(path)} could not be read ({code_span(problem)}): {NOT_APPLIED}"
            continue
        if not parser.has_section("flake8") and not parser.has_section("flake8:local-plugins"):
            continue  # flake8 does not take it for its configuration
        section = parser.items("flake8") if parser.has_section("flake8") else []
        options = {key.replace("_", "-"): value for key, value in section}
        return (
            Flake8Config(
                source=path,
                exclude=_patterns(options.get("exclude")) + _patterns(options.get("extend-exclude")),
                filename=_patterns(options.get("filename")),
                per_file_ignores=_per_file(options.get("per-file-ignores")),
            ),
            note,
        )
    return None, note
