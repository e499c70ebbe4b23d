"""Pure decisions about who caused an event and whether the bot may act on it.

Every write the bot makes comes back as a webhook whose sender is the bot itself (or, for
review requests, its decoy user); these functions are what keeps it from waking itself.
No I/O here: inputs are plain values, outputs are booleans.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

BOT_SUFFIX = "[bot]"


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is on GitHub.

    REST and webhooks show an App as ``slug[bot]``; GraphQL shows the bare slug. The decoy is a
    real user account (by default named like the slug) that people request as a reviewer,
    because an App itself cannot be requested.
    """

    slug: str
    decoy_login: str

    @classmethod
    def from_slug(cls, slug: str, decoy_login: str | None = None) -> BotIdentity:
        return cls(slug=slug, decoy_login=decoy_login or slug)

    @property
    def bot_login(self) -> str:
        return f"{self.slug}{BOT_SUFFIX}"


def is_bot_login(login: str | None, identity: BotIdentity) -> bool:
    """True when a REST or webhook ``login`` is the App's own account (``slug[bot]``).

    The bare slug is deliberately not accepted: that spelling belongs to the decoy user in REST,
    and GraphQL's bare-slug form must be checked together with ``__typename == "Bot"``.
    """
    return login is not None and login.casefold() == identity.bot_login.casefold()


def sent_by_bot_or_decoy(sender_login: str | None, identity: BotIdentity | None) -> bool:
    """True when an event was caused by the bot or by its decoy user (a human account that
    only the bot's reviews make act): the self guard, applied when routing an event.

    The sender (not any author) decides: it is whoever caused this delivery, which is what loop
    prevention needs (a PR the bot opened can still be pushed to by a human, and that push must
    wake the bot). Logins are case-insensitive on GitHub. Without a known identity nothing is
    the bot's: the worker does not dispatch at all until it knows who it is.
    """
    if not sender_login or identity is None:
        return False
    folded = sender_login.casefold()
    return folded in (identity.bot_login.casefold(), identity.decoy_login.casefold())


def is_bot_author(typename: str | None, login: str | None, identity: BotIdentity) -> bool:
    """True when a GraphQL ``author { __typename login }`` is the App itself.

    GraphQL shows an App's login without the ``[bot]`` suffix that REST shows, so the bare slug
    alone would also match the decoy (a real user named like the slug): the type decides.
    REST's ``slug[bot]`` spelling is accepted too, whatever the type says.
    """
    if not login:
        return False
    if login.casefold() == identity.bot_login.casefold():
        return True
    return typename == "Bot" and login.casefold() == identity.slug.casefold()


def may_ask(
    *, commenter: str | None, association: str | None, pr_author: str | None, allowed: Iterable[str]
) -> bool:
    """Whether the bot may act on someone's command: the PR's author may always ask; others by
    their association with the repository (``review.allowed_associations``)."""
    if commenter is not None and pr_author is not None and commenter.casefold() == pr_author.casefold():
        return True
    return (association or "").upper() in {a.upper() for a in allowed}
