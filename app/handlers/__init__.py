"""Handlers, one module per concern, each with its own ``router``; composed here, once.

``gidgethub.routing.Router(*others)`` copies the routes when it is built, so the composition
happens after every concern module has registered its handlers (at import time below).
"""

from __future__ import annotations

from gidgethub import routing

from . import decoy, mentions, readiness, review, threads

CONCERNS: tuple[routing.Router, ...] = (
    mentions.router,
    review.router,
    decoy.router,
    threads.router,
    readiness.router,
)

router = routing.Router(*CONCERNS)
