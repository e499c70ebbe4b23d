"""Which rule documentation the bot may post as a live link. A leaf module, pure.

A finding names its rule's page (``Finding.docs``) apart from its message, which is made inert
(``engine.inert``). Some of those addresses come from a tool's output about the pull request's
files (zizmor's ``url``, ruff's), so an address is only ever posted live (``inert.docs_link``)
when it is on the documentation of a tool the bot runs, under that documentation's own prefix,
followed by a plain path: nothing that could end the Markdown link, start another, hide
another address behind a percent escape, or climb out of the prefix with ``..``.
"""

from __future__ import annotations

import re

__all__ = ["DOCS_PREFIXES", "postable_docs"]

# What the analyzers link (``shell.shellcheck_link``, ``dockerfile.rule_link``,
# ``workflows.DOCS`` and ``SYNTAX_DOCS``, ruff's own ``url``): each up to and with the ``/``
# after its path's first part, so the host is exactly this one.
DOCS_PREFIXES = (
    "https://www.shellcheck.net/wiki/",
    "https://github.com/hadolint/hadolint/wiki/",
    "https://docs.zizmor.sh/audits/",
    "https://docs.astral.sh/ruff/rules/",
    "https://docs.github.com/actions/",
)
_PLAIN = re.compile(r"[A-Za-z0-9/_.#-]{0,200}")


def postable_docs(url: str) -> bool:
    """Whether ``url`` may be posted as a live link: one of ``DOCS_PREFIXES``, then a plain path
    (ASCII letters, digits, ``-_./#``; no ``.`` or ``..`` segment) of at most 200 characters."""
    rest = next((url[len(prefix) :] for prefix in DOCS_PREFIXES if url.startswith(prefix)), None)
    if rest is None or _PLAIN.fullmatch(rest) is None:
        return False
    return not {".", ".."} & set(rest.split("#", 1)[0].split("/"))
