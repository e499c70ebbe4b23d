"""Dispatch of a flat event to the handlers of every concern.

Handlers register on gidgethub ``Router`` objects, one per concern, by event and action, and the
routers are composed once (``app/handlers/__init__.py``). The routers are used for *lookup*
(``Router.fetch``); the calls are made here rather than by ``Router.dispatch`` because dispatch
runs callbacks in no fixed order and stops at the first exception. Here they run in a stable
order, each is recorded once it has succeeded (a retried job skips it), and the bot's own
events reach only callbacks that opted in with :func:`accepts_own_events`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from gidgethub import routing, sansio

from .events import AnyEvent
from .guards import BotIdentity

if TYPE_CHECKING:
    from .config import Settings
    from .github import InstallationClient
    from .handlers.common import AnalysisCache, RepoConfigs
    from .review.model import Reviewer

log = logging.getLogger(__name__)

OWN_EVENTS_ATTR = "__revbot_accepts_own_events__"


@dataclass(frozen=True, slots=True)
class Context:
    """What a handler gets besides its event: GitHub scoped to the event's installation, who the
    bot is, the deployment's settings, the review engine, and the shared caches."""

    gh: InstallationClient
    identity: BotIdentity
    settings: Settings
    reviewer: Reviewer
    repo_configs: RepoConfigs
    analyses: AnalysisCache
    received_at: float  # when this job's delivery reached the webhook endpoint (epoch seconds)


Handler = Callable[[Any, Context], Awaitable[None]]
H = TypeVar("H", bound=Handler)


def accepts_own_events(handler: H) -> H:
    """Let a handler see events the bot (or its decoy) caused. Everything else never does."""
    setattr(handler, OWN_EVENTS_ATTR, True)
    return handler


def handler_name(handler: Handler) -> str:
    return f"{handler.__module__}.{handler.__qualname__}"


class HandlerDone(Protocol):
    async def __call__(self, name: str) -> None: ...


def select_handlers(router: routing.Router, event: AnyEvent, payload: dict[str, Any]) -> list[Handler]:
    """The handlers this event should run, in a stable order, own events filtered (pure)."""
    found: Iterable[Handler] = router.fetch(
        sansio.Event(payload, event=event.event, delivery_id=event.delivery_id)
    )
    chosen = [h for h in found if not event.is_own_app or getattr(h, OWN_EVENTS_ATTR, False)]
    return sorted(chosen, key=handler_name)


async def run_handlers(
    handlers: list[Handler],
    event: AnyEvent,
    context: Context,
    *,
    already_done: Iterable[str],
    on_done: HandlerDone,
) -> None:
    """Run each handler not done in an earlier attempt; an exception stops the job (it is retried
    or failed by the worker) after the handlers before it were recorded as done."""
    done = set(already_done)
    for handler in handlers:
        name = handler_name(handler)
        if name in done:
            log.info("handler %s already done in an earlier attempt", name)
            continue
        await handler(event, context)
        await on_done(name)
