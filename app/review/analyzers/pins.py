"""The pinning convention of a repository's workflows, which wins over zizmor's
``unpinned-uses``. Pure.

Where every third-party ``uses:`` at the base pins a tag, none a commit, a tag pin is the
repository's choice (deliberate, bumped by a bot), not a finding; where one pins a commit, a tag
pin stays one. A dependency bot's bump of an action the base pinned by tag is not commented
either, GitHub's own included (a nit elsewhere): the pin stood before the bot touched it.

The convention is read from the base side of the workflows the pull request changes, which the
differential comparison rebuilds from the patch at no cost: those are the files whose lines are
judged, and a bot's bump touches exactly the workflows it bumps. Reading every other workflow at
the base would cost a read each, on every review of a workflow. A new workflow alone shows no
convention, so its tag pins are judged as before: saying too much, never hiding a step back from
commit pins. A ``uses:`` is compared unquoted: ``"actions/checkout@v4"`` is GitHub's own.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence

__all__ = [
    "DEPENDENCY_BOTS",
    "FIRST_PARTY",
    "PINNED_BY_TAG",
    "Pinning",
    "action_refs",
    "pinned_as_usual",
    "pinning",
    "unquoted",
]

FIRST_PARTY = ("actions/", "github/")
# The pull request authors whose bumps are the repository's routine (GitHub's logins for the apps).
DEPENDENCY_BOTS = frozenset({"dependabot[bot]", "renovate[bot]"})
PINNED_BY_TAG = "actions pinned by tag are not flagged: the repository pins every third-party action by tag"
_USES = re.compile(r"""^[ \t-]*uses:[ \t]*['"]?([^'"\s#]+)""")
_SHA = re.compile(r"[0-9a-f]{40}")


class Pinning(enum.StrEnum):
    """How a repository pins the third-party actions its workflows use."""

    TAG = "tag"  # every one by a tag or branch, none by a commit: deliberate, bumped by a bot
    SHA = "sha"  # some by a commit sha: the repository holds itself to it
    UNKNOWN = "unknown"  # no third-party action to tell by


def unquoted(text: str) -> str:
    """A YAML scalar as zizmor quotes it from the file (``"actions/checkout@v4"``), unquoted."""
    return text.strip().strip("'\"")


def action_refs(rows: Iterable[str]) -> list[tuple[str, str]]:
    """(action, ref) of each action's ``uses:`` in these workflow lines, quoted or not (no local
    path, no ``docker://`` image)."""
    out: list[tuple[str, str]] = []
    for row in rows:
        match = _USES.match(row)
        value = match.group(1) if match else ""
        action, at, ref = value.partition("@")
        if at and not action.startswith(("./", "docker://")):
            out.append((action, ref))
    return out


def pinning(refs: Sequence[tuple[str, str]]) -> Pinning:
    """The convention the base's workflows show (``action_refs``): GitHub's own actions, a nit
    on a tag whatever the convention, do not tell it."""
    third_party = [ref for action, ref in refs if not action.startswith(FIRST_PARTY)]
    if not third_party:
        return Pinning.UNKNOWN
    return Pinning.SHA if any(_SHA.fullmatch(ref) for ref in third_party) else Pinning.TAG


def pinned_as_usual(feature: str, convention: Pinning, base: Sequence[tuple[str, str]], author: str) -> bool:
    """Whether an ``unpinned-uses`` finding on ``feature`` (``owner/action@ref``) is the
    repository's own choice, not the pull request's: where every third-party action is pinned by
    tag, a tag pin; and a dependency bot's bump of an action the base pinned the same way
    (GitHub's own included: ``actions/checkout@v4`` to ``@v5`` is not even a nit)."""
    action, _, ref = unquoted(feature).partition("@")
    if _SHA.fullmatch(ref):
        return False
    if convention is Pinning.TAG:
        return True
    return author in DEPENDENCY_BOTS and any(a == action and not _SHA.fullmatch(r) for a, r in base)
