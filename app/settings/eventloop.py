"""The event loop ``serve`` and ``worker`` run on, chosen once where it is created.

uvloop where it is installed (the default install includes it wherever it has wheels: an
environment marker in ``pyproject.toml``), else asyncio's own loop. ``EVENT_LOOP`` chooses
explicitly: ``auto`` (the default), ``uvloop`` (a start without it installed is a configuration
error) or ``asyncio``. Nothing else depends on which loop runs: both are asyncio loops.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import logging
from collections.abc import Callable, Coroutine
from enum import StrEnum
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class EventLoop(StrEnum):
    AUTO = "auto"
    UVLOOP = "uvloop"
    ASYNCIO = "asyncio"


NOT_INSTALLED = "EVENT_LOOP: uvloop is not installed (pip install uvloop, or EVENT_LOOP=auto)"


def uvloop_installed() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def chosen(setting: EventLoop, *, installed: bool) -> EventLoop | None:
    """The loop to run (``UVLOOP`` or ``ASYNCIO``), or None when the setting cannot be met (pure)."""
    if setting is EventLoop.AUTO:
        return EventLoop.UVLOOP if installed else EventLoop.ASYNCIO
    if setting is EventLoop.UVLOOP and not installed:
        return None
    return setting


def _factory(loop: EventLoop) -> Callable[[], asyncio.AbstractEventLoop] | None:
    if loop is EventLoop.ASYNCIO:
        return None
    import uvloop

    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T], *, loop: EventLoop) -> T:
    """``asyncio.run(main)`` on ``loop`` (one of ``chosen``'s answers)."""
    with asyncio.Runner(loop_factory=_factory(loop)) as runner:
        version = importlib.metadata.version("uvloop") if loop is EventLoop.UVLOOP else None
        log.info("event loop: %s%s", loop, f" {version}" if version else "")
        return runner.run(main)
