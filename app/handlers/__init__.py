"""Handlers, one module per concern, each with its own ``router``; composed here, once.

``CONCERNS`` declares the order the handlers of one event run in: concern by concern as listed,
and within a concern in the order its module registers them (``concern.OrderedRouter``). A
handler's name is what a retried job records as done (``routing.handler_name``), so renaming a
module or a handler changes that record; ``tests/test_handlers_unit.py`` lists both.

gidgethub's ``Router(*others)`` copies the routes when it is built, so the composition happens
after every concern module has registered its handlers (at import time below).
"""

from __future__ import annotations

from . import decoy, mentions, readiness, review, threads
from .concern import OrderedRouter

CONCERNS: tuple[OrderedRouter, ...] = (
    mentions.router,
    review.router,
    decoy.router,
    threads.router,
    readiness.router,
)

router = OrderedRouter(*CONCERNS)
