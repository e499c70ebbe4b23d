"""Benchmark: how long ``python -m app replay`` takes for one pull request of 50 pushes.

Builds a git repository (``tests/replay_repo.Repo``) whose one merged pull request opens with a
blocker (so the bot blocks, and with ``review.on_push`` re-reviews every push), then 48 pushes
that each add a function, and a last one that fixes the blocker; an hour between pushes, so
readiness's timers come due between them as they would. Replays it through the real bot against
the fake GitHub and prints the time and the figures. The issue's bound: under a minute.
A script, not a test.

    python bench/replay_speed.py [--pushes 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.replay import ReplayOptions, replay  # noqa: E402 - after the path is set
from app.replay.measure import totals  # noqa: E402
from tests.replay_repo import Repo  # noqa: E402

BOUND_SECONDS = 60.0


def build(path: Path, pushes: int) -> None:
    repo = Repo(path)
    path.mkdir(parents=True)
    repo.git("init", "-q", "-b", "main")
    repo.commit({"src/base.py": "def base():\n    return 1\n"}, "Initial")
    repo.git("checkout", "-q", "-b", "long")
    body = "def handler(request):\n    return render(request)\n"
    repo.commit({"src/long.py": body}, "Add the handler")
    for n in range(pushes - 2):
        body += f"\n\ndef step_{n}(value):\n    return value + {n}\n"
        repo.commit({"src/long.py": body}, f"Add step {n}")
    repo.commit({"src/long.py": body.replace("render(request)", "str(request)")}, "Fix the handler")
    repo.merge("long", 1, "A long pull request")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pushes", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="revbot-replay-bench-") as tmp:
        clone = Path(tmp) / "long"
        build(clone, args.pushes)
        started = time.perf_counter()
        reports, _ = await replay(ReplayOptions(clone=clone, workdir=Path(tmp) / "work"), os.environ)
        seconds = time.perf_counter() - started
    total = totals(reports)
    print(
        f"replayed 1 PR of {total['pushes']} pushes in {seconds:.1f}s "
        f"({seconds / total['pushes'] * 1000:.0f} ms per push; bound {BOUND_SECONDS:.0f}s): "
        f"{total['rounds']} rounds, {total['comments']} comments, {total['resolved_verified']} resolved, "
        f"{total['readiness_comments']} readiness comments, {total['crashes']} crashes"
    )
    return 0 if seconds < BOUND_SECONDS else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
