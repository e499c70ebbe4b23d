"""The demo's stage: the sandbox GitHub and the real bot, wired to each other over loopback.

The bot is the production composition (``harness.BotAndFake``: ``Runtime`` with its aiohttp
``web_app()`` served on a real port, its ledger and queue in SQLite), with its worker in-process
or in a separate worker process for the crash-recovery story. The fake GitHub runs without a
request validator: the conformance checker is test-only. The fake's ``calls`` and
``webhooks_sent`` lists are replaced by lists that also note *when* each entry arrived, so the
timeline can show who did what when.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, SupportsIndex, TypeVar

from ..jobs.worker import WorkerOptions
from ..sandbox import FakeGitHub
from .harness import APP_ID, BOT, FAST_WORKER, REPO, SLUG, BotAndFake

__all__ = ["BOT", "DECOY", "REPO", "Stage", "StampedList"]

DECOY = SLUG  # the user people request as reviewer (DECOY_LOGIN defaults to the slug)

T = TypeVar("T")


class StampedList(list[T]):
    """A list that remembers the wall-clock time of every ``append``."""

    def __init__(self, items: Iterable[T] = ()) -> None:
        super().__init__(items)
        self.times: list[float] = [time.time()] * len(self)

    def append(self, item: T, /) -> None:
        self.times.append(time.time())
        super().append(item)

    def time_of(self, index: SupportsIndex) -> float:
        return self.times[index]


# Readiness looks this long after an event: a day in the stories about other things (their
# timelines stay as they are), a blink in the ``ready`` story.
READINESS_OFF_STAGE = 86400.0


class Stage(BotAndFake):
    """The fake GitHub (with one installation and one repository) and the bot, both on loopback."""

    def __init__(
        self,
        workdir: Path,
        *,
        approve: bool = True,
        run_worker: bool = True,
        worker_options: WorkerOptions = FAST_WORKER,
        readiness_settle: float = READINESS_OFF_STAGE,
    ) -> None:
        secret = secrets.token_hex(16)
        fake = FakeGitHub(app_id=APP_ID, app_slug=SLUG, webhook_secret=secret)
        self.calls: StampedList[Any] = StampedList()
        self.webhooks: StampedList[tuple[str, str, dict[str, Any], int]] = StampedList()
        fake.calls = self.calls
        fake.webhooks_sent = self.webhooks
        super().__init__(
            workdir,
            fake,
            secret=secret,
            env={
                "REVIEW_APPROVE": "true" if approve else "false",
                "LOG_LEVEL": "info",
                "HOST": "127.0.0.1",
                "READINESS_SETTLE_SECONDS": str(readiness_settle),
            },
            worker_options=worker_options,
            run_worker=run_worker,
            database_name="revbot.sqlite3",
        )
        self.fake.add_user(DECOY)

    # ---------------------------------------------------------------- repository helpers
    def open_pull(
        self,
        head_files: dict[str, str | None],
        *,
        base_files: dict[str, str | None],
        author: str,
        title: str,
        body: str = "",
        branch: str = "feature",
        notify: bool = False,
    ) -> int:
        if "main" not in self.fake.world.repo(REPO).branches:
            self.fake.push(REPO, "main", base_files, message="Initial commit")
        self.fake.push(REPO, branch, head_files, message=title)
        pull = self.fake.open_pull(REPO, head=branch, author=author, title=title, body=body, notify=notify)
        return int(pull["number"])

    async def start_worker_process(self, log_path: Path) -> asyncio.subprocess.Process:
        """``python -m app.demo.worker_process``: the real worker loop in its own process."""
        env = {**os.environ, **self.env()}
        with log_path.open("ab") as stderr:  # a crash before logging starts lands in the log too
            return await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "app.demo.worker_process",
                "--log",
                str(log_path),
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=stderr,
            )
