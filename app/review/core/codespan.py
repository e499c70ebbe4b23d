"""CommonMark's rule for a code span that holds any text: a backtick fence longer than any run of
backticks inside it, padded when the text starts or ends with one. A leaf module: the analyzers
and the lint configuration quote the PR's values with it where they write their messages
(``inert.code`` makes a value safe to post, with this rule)."""

from __future__ import annotations

import re

_TICKS = re.compile(r"`+")


def code_span(text: str) -> str:
    """``text`` (on one line) as one code span nothing inside can end."""
    flat = text.replace("\r", " ").replace("\n", " ")
    longest = max((len(run) for run in _TICKS.findall(flat)), default=0)
    fence = "`" * (longest + 1)
    padding = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{padding}{flat}{padding}{fence}"
