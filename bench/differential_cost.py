"""Benchmark: what differential findings cost (``core.differential``): the built-in reviewer on
a 250-file pull request that reformats every file of a module tree in which every file already
has findings (the worst case: every file's base side is analysed), with the base-side comparison
off, on with a cold cache, and on again (a second round, or another pull request over the same
base: the cache answers). Real analysis processes; no GitHub (contents in memory). Prints the
median seconds of each and the ratios. It is a script, not a test:

    python bench/differential_cost.py [--files 250] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import statistics
import time
from collections.abc import Mapping, Sequence

from app.review.analyzers import Analyzer, default_analyzers
from app.review.core.model import ChangedFile, FileContent, PullContext, RepoTree, ReviewSettings
from app.review.engine.builtin import BuiltinReviewer
from app.review.isolation.pool import shared_pool


def base_text(n: int) -> str:
    """A module with Python 2 names behind a version check, written before a formatter ran."""
    body = "import sys\n\nPY2 = sys.version_info[0]==2\n\n"
    body += "".join(f"def function_{n}_{k}(value):\n    return value+{k}\n\n\n" for k in range(20))
    body += "if PY2:\n    text_type=unicode\n    integer_types=(int,long)\n"
    return body


def formatted(text: str) -> str:
    return (
        text.replace("==", " == ")
        .replace("value+", "value + ")
        .replace("=(int,long)", " = (int, long)")
        .replace("text_type=unicode", "text_type = unicode")
    )


def patch(old: str, new: str) -> str:
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3)
    return "\n".join(line for line in lines if not line.startswith(("---", "+++")))


def context(count: int) -> PullContext:
    heads: dict[str, str] = {}
    files: list[ChangedFile] = []
    for n in range(count):
        path = f"pkg/module_{n:03}.py"
        old = base_text(n)
        heads[path] = formatted(old)
        files.append(ChangedFile(path, "modified", patch(old, heads[path]), additions=24, deletions=24))

    async def read(paths: Sequence[str]) -> Mapping[str, FileContent | None]:
        return {p: FileContent(heads[p], len(heads[p])) if p in heads else None for p in paths}

    async def tree() -> RepoTree:
        return RepoTree.of([*heads, "pkg/__init__.py"])

    return PullContext(
        repo="bench/widgets",
        pr_number=1,
        title="Format the code with black",
        author_login="alice",
        base_sha="a" * 40,
        head_sha="b" * 40,
        files=tuple(files),
        read=read,
        tree=tree,
        settings=ReviewSettings(max_files=3000),
    )


def analyzers(differential: bool) -> list[Analyzer]:
    found = default_analyzers()
    if not differential:
        for analyzer in found:
            analyzer.differential = False  # type: ignore[misc]  # the comparison off, nothing else
    return found


async def timed(reviewer: BuiltinReviewer, pull: PullContext) -> tuple[float, int, int]:
    started = time.perf_counter()
    result = await reviewer.review(pull)
    blockers = sum(1 for f in result.findings if f.severity.label == "blocker")
    return time.perf_counter() - started, blockers, len(result.preexisting)


async def main(count: int, runs: int) -> None:
    pull = context(count)
    shared_pool()  # started once, outside the timings
    await BuiltinReviewer(analyzers(False)).review(context(5))  # its processes warmed up too
    rows: dict[str, list[float]] = {"off": [], "on, cold cache": [], "on, cached": []}
    said: dict[str, tuple[int, int]] = {}
    for _ in range(runs):
        seconds, blockers, old = await timed(BuiltinReviewer(analyzers(False)), pull)
        rows["off"].append(seconds)
        said["off"] = (blockers, old)
        reviewer = BuiltinReviewer(analyzers(True))
        seconds, blockers, old = await timed(reviewer, pull)
        rows["on, cold cache"].append(seconds)
        said["on, cold cache"] = (blockers, old)
        seconds, blockers, old = await timed(reviewer, pull)
        rows["on, cached"].append(seconds)
        said["on, cached"] = (blockers, old)
    off = statistics.median(rows["off"])
    print(f"{count} modified files, every one with findings at the base; median of {runs} runs")
    for name, values in rows.items():
        median = statistics.median(values)
        blockers, old = said[name]
        print(f"  {name:15} {median:6.2f} s  x{median / off:4.2f}  blockers={blockers} preexisting={old}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=250)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    asyncio.run(main(options.files, options.runs))
