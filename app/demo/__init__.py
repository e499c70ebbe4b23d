"""``python -m app demo``: the real bot against the sandbox GitHub, playing a story you can watch.

The serving code (``serve``, ``worker``) never imports it (an import contract checks that); the
CLI's ``demo`` command does, and the end-to-end tests use its harness (``harness.BotAndFake``).
"""

from __future__ import annotations

from .play import run_demo
from .show import DemoOptions
from .stories import SCENARIOS

__all__ = ["SCENARIOS", "DemoOptions", "run_demo"]
