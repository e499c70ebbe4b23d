"""What a handler is given besides its event, and the one opt-in a handler can declare.

Handlers are thin: they read their event, decide whether it is theirs, and call a use case
(``app/usecases``) with the job's GitHub client and the bot.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..github.client import GitHubClient
from ..usecases.bot import Bot

OWN_EVENTS_ATTR = "__revbot_accepts_own_events__"


@dataclass(frozen=True, slots=True)
class Context:
    """GitHub scoped to the event's installation (a ``github.installation.InstallationClient``
    when serving), the bot, and when this job's delivery reached the webhook endpoint (epoch
    seconds)."""

    gh: GitHubClient
    bot: Bot
    received_at: float


Handler = Callable[[Any, Context], Awaitable[None]]
H = TypeVar("H", bound=Handler)


def accepts_own_events(handler: H) -> H:
    """Let a handler see events the bot (or its decoy) caused. Everything else never does."""
    setattr(handler, OWN_EVENTS_ATTR, True)
    return handler


def opts_into_own_events(handler: Handler) -> bool:
    """Whether ``handler`` was marked with :func:`accepts_own_events`."""
    return bool(getattr(handler, OWN_EVENTS_ATTR, False))
