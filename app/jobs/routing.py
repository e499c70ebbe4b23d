"""Dispatch of a flat event to the handlers of every concern.

Handlers register on gidgethub ``Router`` objects, one per concern, by event and action, and the
routers are composed once (``app/handlers/__init__.py``). The routers are used for *lookup*
(``OrderedRouter.fetch_in_order``); the calls are made here rather than by ``Router.dispatch``
because dispatch runs callbacks in no fixed order and stops at the first exception. Here they run
in the declared order (``app/handlers/concern.py``), each is recorded once it has succeeded (a
retried job skips it), and the bot's own events reach only callbacks that opted in with
:func:`accepts_own_events`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol

from gidgethub import sansio

from ..events import AnyEvent
from ..guards import BotIdentity, sent_by_bot_or_decoy
from ..handlers.concern import OrderedRouter
from ..handlers.context import Context, Handler, opts_into_own_events

log = logging.getLogger(__name__)


def handler_name(handler: Handler) -> str:
    return f"{handler.__module__}.{handler.__qualname__}"


class HandlerDone(Protocol):
    async def __call__(self, name: str) -> None: ...


def select_handlers(
    router: OrderedRouter, event: AnyEvent, payload: dict[str, Any], identity: BotIdentity
) -> list[Handler]:
    """The handlers this event should run, in the declared order; of the events the bot or its
    decoy caused, only the handlers that opted in (pure)."""
    found = router.fetch_in_order(sansio.Event(payload, event=event.event, delivery_id=event.delivery_id))
    by_bot = sent_by_bot_or_decoy(event.sender_login, identity)
    return [h for h in found if not by_bot or opts_into_own_events(h)]


async def run_handlers(
    handlers: list[Handler],
    event: AnyEvent,
    ctx: Context,
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
        await handler(event, ctx)
        await on_done(name)
