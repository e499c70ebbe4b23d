"""Text from a model, made safe to post: secrets redacted, capped, mentions defused. Pure."""

from __future__ import annotations

import re

from ..analyzers.secrets import redact_secrets

MAX_MESSAGE_CHARS = 600
_MENTION = re.compile(r"(?<![\w`])@(?=[A-Za-z0-9])")
_CODE_SPAN = re.compile(r"(`+).+?\1", re.DOTALL)


def defuse_mentions(text: str) -> str:
    """``@name`` outside code spans would ping someone: a zero-width joiner keeps it readable."""
    out: list[str] = []
    position = 0
    for span in _CODE_SPAN.finditer(text):
        out.append(_MENTION.sub("@\u2060", text[position : span.start()]))
        out.append(span.group(0))
        position = span.end()
    out.append(_MENTION.sub("@\u2060", text[position:]))
    return "".join(out)


def clean_message(text: str) -> str:
    flat = " ".join(redact_secrets(text).split())
    if len(flat) > MAX_MESSAGE_CHARS:
        flat = flat[: MAX_MESSAGE_CHARS - 1].rstrip() + "\u2026"
    return defuse_mentions(flat)
