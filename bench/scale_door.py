"""The door of ``bench/scale_out.py``: ``python -m app serve`` with its in-process worker off, so
that the worker processes the bench starts are all the workers there are (``serve`` has no
switch for it). Settings from the environment, as for ``serve``; the rest is ``serve``'s own
code: ``runtime.serve`` on uvloop where installed, until SIGTERM.

    python bench/scale_door.py
"""

from __future__ import annotations

import sys

from app.runtime import Runtime, serve
from app.settings import eventloop
from app.settings.config import load_settings
from app.settings.logs import setup_logging


def main() -> int:
    settings, pem = load_settings()
    setup_logging(settings.log_level_number)
    loop = eventloop.chosen(settings.event_loop, installed=eventloop.uvloop_installed())
    if loop is None:
        print(eventloop.NOT_INSTALLED, file=sys.stderr)
        return 2
    runtime = Runtime(settings, pem, run_worker=False)
    eventloop.run(serve(runtime, host=settings.host, port=settings.port), loop=loop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
