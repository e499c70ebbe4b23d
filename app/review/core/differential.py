"""Which findings at head stood at the base already: a pull request is blamed only for what it
introduced. Pure.

A finding's position says nothing after a formatter rewrote a file, a function moved or a file
was renamed, so a finding is matched across the two sides by an identity without one:

- the **rule** and the **severity** (the same problem turned more severe is new);
- **what was flagged**: the finding's message, which names the symbol or expression (ruff's
  "Undefined name `unicode`", a workflow's expression), with numbers outside code spans folded
  (a line length, a column: they move when a line is reformatted), and its ``evidence``;
- its **scope**: the chain of ``def``/``class`` names enclosing its line in a Python file
  (read from indentation, so a file that does not parse has one too), nothing elsewhere;
- its **occurrence**: how many findings of that identity the file holds. The base's count of an
  identity is what the head may hold without blame; the head's extra ones are new.

When the head holds more of an identity than the base, the ones kept as the base's are those on
lines the pull request did not touch, then the first in the file: a line the pull request
duplicates is new, and so is the one it adds next to an old one. Moving a finding inside its
scope (deleting it in one place, adding it in another) is taken as a move: same problem, same
place in the code's structure.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Collection, Sequence

from .model import Finding

__all__ = ["Identity", "identity", "preexisting", "scopes"]

Identity = tuple[str, int, str, str, str]  # rule, severity, what was flagged, evidence, scope

_DEFINITION = re.compile(r"^([ \t]*)(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_NUMBER = re.compile(r"\d+")


def scopes(rows: Sequence[str], *, python: bool) -> tuple[str, ...]:
    """For each row of a file (row ``n`` at index ``n - 1``), the dotted names of the
    definitions enclosing it (``"Client.send"``); ``""`` at module level and in other files.
    Indentation decides, as Python's does, so a file that does not parse is read all the same."""
    if not python:
        return ("",) * len(rows)
    out: list[str] = []
    stack: list[tuple[int, str]] = []  # (indentation of the definition, its name)
    quote: str | None = None  # the triple quote of a string still open (its lines are text)
    for row in rows:
        stripped = row.strip()
        in_string = quote is not None
        quote = _open_quote(row, quote)
        if stripped and not stripped.startswith("#") and not in_string:
            width = len(row.expandtabs(8)) - len(row.expandtabs(8).lstrip())
            while stack and stack[-1][0] >= width:
                stack.pop()
            match = _DEFINITION.match(row)
            if match:  # its own line belongs to the scope it opens
                stack.append((width, match.group(2)))
        out.append(".".join(name for _, name in stack))
    return tuple(out)


def _open_quote(row: str, quote: str | None) -> str | None:
    """The triple quote still open after ``row``, given the one open before it."""
    position = 0
    while True:
        if quote is None:
            found = [(row.find(q, position), q) for q in ('"""', "'''")]
            found = [(at, q) for at, q in found if at >= 0]
            if not found:
                return None
            position, quote = min(found)
            position += 3
        else:
            at = row.find(quote, position)
            if at < 0:
                return quote
            position, quote = at + 3, None


def _flagged(message: str) -> str:
    """The message with numbers outside code spans folded: what it names, not where."""
    out: list[str] = []
    position = 0
    for span in _CODE_SPAN.finditer(message):
        out += [_NUMBER.sub("#", message[position : span.start()]), span.group(0)]
        position = span.end()
    out.append(_NUMBER.sub("#", message[position:]))
    return "".join(out)


def identity(finding: Finding, scope_of: Sequence[str]) -> Identity:
    """The position-free identity of ``finding`` in a file whose rows have ``scope_of``."""
    index = finding.line - 1
    scope = scope_of[index] if 0 <= index < len(scope_of) else ""
    return (finding.rule, int(finding.severity), _flagged(finding.message), finding.evidence, scope)


def preexisting(
    head: Sequence[Finding],
    head_scopes: Sequence[str],
    base: Collection[Identity],
    *,
    touched: Collection[int],
) -> list[bool]:
    """For each finding of one file at head, whether it stood at the base: the base's findings
    of that file are given by their identities (``base``, one entry per finding). ``touched``:
    the head lines the pull request added or changed."""
    allowed = Counter(base)
    by_identity: defaultdict[Identity, list[int]] = defaultdict(list)
    for index, finding in enumerate(head):
        by_identity[identity(finding, head_scopes)].append(index)
    out = [False] * len(head)
    for key, indices in by_identity.items():
        # Untouched lines first (they are the base's own), then in the order of the file.
        ranked = sorted(indices, key=lambda i: (head[i].line in touched, head[i].line, i))
        for index in ranked[: allowed[key]]:
            out[index] = True
    return out
