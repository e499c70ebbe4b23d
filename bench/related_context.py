"""Benchmark: the model reviewer's related context for hostile files (issue 27). ``new``: one new
file of 4,000 tiny functions (about 80 KB), each calling the next, every line added. ``beside``:
that file read beside a changed one whose 2,500 added lines each call one of its functions.
Times the work itself (``ContextJob.run`` in this process) and the same job through an analysis
child (``ProcessPool``, as a review runs it). A script, not a test.

    python bench/related_context.py [--functions 4000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from dataclasses import replace

from app.review.core.diff import parse_patch
from app.review.isolation.limits import Limits, Tripped
from app.review.isolation.pool import ProcessPool
from app.review.llm.bounded import ContextJob, Contexts, Reviewed

PATH = "pkg/hostile.py"
CALLER = "pkg/calls.py"


def hostile(functions: int) -> str:
    return "".join(f"def a{i}(): a{i + 1}()\n" for i in range(functions))


def calls(functions: int) -> str:
    return "from pkg import hostile\n\n\ndef run():\n" + "".join(
        f"    hostile.a{i}()\n" for i in range(functions)
    )


def added(text: str) -> Reviewed:
    lines = text.splitlines()
    return Reviewed(
        "", parse_patch(f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines))
    )


def hostile_job(scenario: str, functions: int) -> ContextJob:
    if scenario == "new":
        texts = {PATH: hostile(functions)}
        reviewed = replace(added(texts[PATH]), path=PATH)
    else:
        texts = {PATH: hostile(functions), CALLER: calls(functions * 5 // 8)}
        reviewed = replace(added(texts[CALLER]), path=CALLER)
    return ContextJob((reviewed,), texts, frozenset(texts), budget_chars=64_000)


async def through_a_child(job: ContextJob, rounds: int) -> list[float]:
    pool = ProcessPool(Limits(workers=1))
    try:
        await pool.network()  # the child started, not timed
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            outcome = await pool.run(job)
            times.append(time.perf_counter() - started)
            assert isinstance(outcome, Contexts) and not isinstance(outcome, Tripped), outcome
        return times
    finally:
        pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for scenario in ("new", "beside"):
        job = hostile_job(scenario, args.functions)
        size = len(job.texts[PATH].encode())
        here = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            found = asyncio.run(job.run())
            here.append(time.perf_counter() - started)
        [context] = found.files
        child = asyncio.run(through_a_child(job, args.rounds))
        print(f"{scenario}: {args.functions} functions, {size:,} bytes; median of {args.rounds}:")
        print(f"  ContextJob.run in this process: {statistics.median(here):.3f} s")
        print(f"  through an analysis child:      {statistics.median(child):.3f} s")
        print(f"  head lines shown: {len(context.head.lines)}, related lines: {len(context.related.lines)}")


if __name__ == "__main__":
    main()
