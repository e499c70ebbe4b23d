"""``python -m app demo``: the real bot against the sandbox GitHub, playing a story you can watch.

Nothing here is imported by production code; only the CLI's ``demo`` command loads it.
"""

from __future__ import annotations

from .stories import SCENARIOS, DemoOptions, run_demo

__all__ = ["SCENARIOS", "DemoOptions", "run_demo"]
