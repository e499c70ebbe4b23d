"""Which event loop ``serve`` and ``worker`` run on (``EVENT_LOOP``), table-driven; the loop itself
is exercised by ``tests/test_serve.py``, which serves on each."""

from __future__ import annotations

import asyncio

import pytest

from app.settings import eventloop
from app.settings.eventloop import EventLoop


@pytest.mark.parametrize(
    ("setting", "installed", "loop"),
    [
        (EventLoop.AUTO, True, EventLoop.UVLOOP),
        (EventLoop.AUTO, False, EventLoop.ASYNCIO),
        (EventLoop.UVLOOP, True, EventLoop.UVLOOP),
        (EventLoop.UVLOOP, False, None),  # a configuration error: asked for, not installed
        (EventLoop.ASYNCIO, True, EventLoop.ASYNCIO),
        (EventLoop.ASYNCIO, False, EventLoop.ASYNCIO),
    ],
)
def test_the_loop_chosen(setting: EventLoop, installed: bool, loop: EventLoop | None) -> None:
    assert eventloop.chosen(setting, installed=installed) == loop


@pytest.mark.skipif(not eventloop.uvloop_installed(), reason="uvloop is not installed here")
def test_run_runs_on_the_chosen_loop() -> None:
    async def loop_module() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert eventloop.run(loop_module(), loop=EventLoop.UVLOOP).startswith("uvloop")
    assert eventloop.run(loop_module(), loop=EventLoop.ASYNCIO).startswith("asyncio")
