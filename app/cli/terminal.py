"""What the command line prints is text a repository or a pull request wrote (titles, commit
subjects, paths, findings): a terminal would obey the control sequences in it (an OSC 52 write
to the clipboard, cursor moves that hide a line, a bell). ``printable`` drops them, and
``printable_output`` puts every print of a command through it."""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Iterator
from typing import TextIO

# An escape sequence whole (CSI ``ESC [ ... final``, OSC ``ESC ] ... BEL|ST``, any other ``ESC x``),
# then every other C0 control but tab and newline, DEL, and the C1 controls.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)


def printable(text: str) -> str:
    """``text`` without terminal control sequences or control characters (tabs and newlines stay)."""
    return _CONTROL.sub("", text)


class PrintableStream(io.TextIOBase):
    """A text stream that writes what it is given, made ``printable``, to ``inner``."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(printable(text))
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()


@contextlib.contextmanager
def printable_output() -> Iterator[None]:
    """Standard output and error, made ``printable``, for as long as the block runs."""
    with (
        contextlib.redirect_stdout(PrintableStream(sys.stdout)),
        contextlib.redirect_stderr(PrintableStream(sys.stderr)),
    ):
        yield
