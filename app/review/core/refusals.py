"""What a pull request wrote can be built to exhaust a parser (3,000 nested ``[``, a 40 KB
``1+1+…``): every parse of PR-derived data treats that as a refused file, said as such, never as
an analyzer that failed (which would drop every finding of that analyzer, on every file)."""

from __future__ import annotations

import tomllib
from tomllib import TOMLDecodeError
from typing import Any

__all__ = ["EXHAUSTED", "TOMLDecodeError", "load_toml"]

# What a parser raises when a document nests deeper than its stack or grows past memory; each
# parse site catches these beside the parser's own error.
EXHAUSTED = (RecursionError, MemoryError)


def load_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads``; a document that exhausts the parser raises ``TOMLDecodeError``, as one
    that is not TOML does."""
    try:
        return tomllib.loads(text)
    except EXHAUSTED as exc:
        raise TOMLDecodeError(f"it nests too deeply to read ({type(exc).__name__})") from None
