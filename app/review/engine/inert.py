"""Text the pull request controls, made inert for Markdown: the one place that decides how.

Everything the bot posts (review bodies, inline comments, check runs, thread answers, the
readiness comment, command answers) may quote a path, a pattern, a name, a line of code, a tool's
message quoting code, or the model's words: all of it chosen by whoever wrote the PR. Posted
as it is, such text could ping people (``@octocat``), show a live link
(``[click here](https://evil.example/login)``, a bare ``https://`` or ``www.`` autolink, an
e-mail address), cross-reference an issue (``#12``), open a heading or an HTML comment (and so
forge or end one of the bot's hidden markers), or end the code span meant to hold it.

- ``code``: a value (a path, a pattern, a check's name) as one code span whose backtick fence is
  longer than any run of backticks inside it (CommonMark's rule, ``codespan``: nothing inside
  can end it). The analyzers quote values with ``codespan`` where they write a message; the
  message is posted through ``escape``, which re-fences its spans with ``code``.
- ``escape``: prose that mixes the bot's or a tool's words with quoted values (a rule's message,
  a note, the model's text): its code spans are re-fenced as ``code`` does, everything else is
  escaped (backslashes, stray backticks, brackets, ``<``, ``>``, ``&``), so no link, image,
  HTML or code span can start there.
- ``docs_link``: the one live link the bot adds after such prose, to a rule's documentation,
  only where ``core.doclinks`` allows the address (never inside the prose, where it would be
  made inert like the rest).

``code`` and ``escape`` flatten the text to one line (no heading, list or block can start
inside it), redact secrets, and ``neutralise`` mentions, autolinks and issue references with an
invisible word joiner (inside a code span too: GitHub shows code literally, the joiner guards a
value wherever it lands). ``neutralise`` alone is for plain-text fields (check-run annotations).
"""

from __future__ import annotations

import re

from ..analyzers.secrets import redact_secrets
from ..core.codespan import code_span
from ..core.doclinks import postable_docs

WORD_JOINER = "\u2060"  # invisible; ends a mention, an autolink or a reference where it stands
ZERO_WIDTH_SPACE = "\u200b"
# What GitHub turns into a notification or a link in text: ``@name`` / ``@org/team`` and e-mail
# addresses, ``scheme://`` and ``www.`` autolinks, ``#123`` and ``GH-123`` references. Each
# pattern matches nothing once the joiner is in (so neutralising twice changes nothing).
_LIVE = re.compile(r"@(?=[A-Za-z0-9])|:(?=//)|(?i:www)(?=\.)|#(?=\d)|(?i:\bgh-)(?=\d)")
_TICKS = re.compile(r"`+")
_PROSE = str.maketrans(
    {"\\": "\\\\", "`": "\\`", "[": "\\[", "]": "\\]", "&": "&amp;", "<": "&lt;", ">": "&gt;"}
)


def docs_link(url: str) -> str:
    """`` ([docs](url))`` for a rule's documentation the bot may link (``doclinks``), else
    nothing: the only links the bot posts live, written outside the escaped prose."""
    return f" ([docs]({url}))" if postable_docs(url) else ""


def neutralise(text: str) -> str:
    """No mention, autolink or issue reference in ``text``; what it shows is unchanged."""
    return _LIVE.sub(lambda m: m.group(0) + WORD_JOINER, text)


def defuse(text: str) -> str:
    """No HTML comment can open or close in text the bot posts, so nothing the PR controls can
    forge (or end) a hidden marker. Inside code spans GitHub shows text literally, so entities
    cannot be used there; a zero-width space splits the sequence without changing what is seen."""
    return text.replace("<!--", f"<{ZERO_WIDTH_SPACE}!--").replace("-->", f"--{ZERO_WIDTH_SPACE}>")


def _flat(text: str) -> str:
    return redact_secrets(text.replace("\r", " ").replace("\n", " "))


def code(text: str) -> str:
    """A value as inline code, whatever backticks it contains (shown literally): one line, no
    secret, no marker, nothing live."""
    return code_span(neutralise(defuse(_flat(text))))


def _prose(text: str) -> str:
    return neutralise(text.translate(_PROSE))


def escape(text: str) -> str:
    """Prose for Markdown: one line, no secret, no HTML, no link or mention; its code spans (as
    CommonMark reads them: a backtick run closed by the next run of the same length) stay code."""
    flat = _flat(text)
    runs = list(_TICKS.finditer(flat))
    out: list[str] = []
    position = 0
    index = 0
    while index < len(runs):
        opener = runs[index]
        width = len(opener.group(0))
        close = next((j for j in range(index + 1, len(runs)) if len(runs[j].group(0)) == width), None)
        content = flat[opener.end() : runs[close].start()] if close is not None else ""
        if close is None or not content.strip(" "):
            index += 1  # no span: these backticks are literal, escaped with the prose around them
            continue
        if len(content) > 2 and content[0] == " " and content[-1] == " ":
            content = content[1:-1]  # CommonMark strips one space each side; ``code`` re-adds it
        out += [_prose(flat[position : opener.start()]), code(content)]
        position = runs[close].end()
        index = close + 1
    out.append(_prose(flat[position:]))
    return "".join(out)
