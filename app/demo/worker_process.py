"""A worker in its own process, for the crash-recovery story: ``python -m app.demo.worker_process``.

It is ``python -m app worker`` with a short lease (2 s), so that when the demo kills it with
SIGKILL mid-job, the job's lease expires quickly and the next worker process claims it again.
Settings come from the environment, exactly as for the real worker; logs go to ``--log``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Sequence
from dataclasses import replace

from ..runtime import Runtime, work
from ..settings.config import load_settings
from ..settings.logs import setup_logging
from .harness import FAST_WORKER

OPTIONS = replace(FAST_WORKER, lease_seconds=2.0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.demo.worker_process")
    parser.add_argument("--log", required=True, help="append JSON log lines to this file")
    args = parser.parse_args(argv)
    settings, pem = load_settings()
    with open(args.log, "a", encoding="utf-8", buffering=1) as stream:
        setup_logging(logging.INFO, stream=stream, json_lines=True)
        runtime = Runtime(
            settings, pem, worker_options=OPTIONS, run_worker=True, identity_backoff=(0.05, 0.2)
        )
        asyncio.run(work(runtime))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
