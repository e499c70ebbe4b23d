"""Starting and stopping the sandbox GitHub and the real bot, wired to each other over loopback.

The bot is the production composition: ``Runtime`` with its aiohttp ``web_app()`` served on a
real port, its ledger and queue in SQLite, and its worker (in-process, or a separate worker
process for the crash-recovery story). The fake GitHub runs without a request validator: the
conformance checker is test-only. The fake's ``calls`` and ``webhooks_sent`` lists are replaced
by lists that also note *when* each entry arrived, so the timeline can show who did what when.
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

from aiohttp import web

from ..config import load_settings
from ..runtime import Runtime
from ..sandbox import FakeGitHub
from ..worker import WorkerOptions

APP_ID = 4242
SLUG = "revbot"
BOT = f"{SLUG}[bot]"
DECOY = SLUG  # the user people request as reviewer (DECOY_LOGIN defaults to the slug)
REPO = "octo/widgets"
INSTALLATION = 77

DEMO_WORKER = WorkerOptions(
    concurrency=8, lease_seconds=30, poll_seconds=0.05, claim_interval=0.0, backoff_base=0.05, backoff_cap=0.2
)

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


class Stage:
    """The fake GitHub (with one installation and one repository) and the bot, both on loopback."""

    def __init__(
        self,
        workdir: Path,
        *,
        approve: bool = True,
        run_worker: bool = True,
        worker_options: WorkerOptions = DEMO_WORKER,
    ) -> None:
        self.workdir = workdir
        self.approve = approve
        self.run_worker = run_worker
        self.worker_options = worker_options
        self.secret = secrets.token_hex(16)
        self.fake = FakeGitHub(app_id=APP_ID, app_slug=SLUG, webhook_secret=self.secret)
        self.calls: StampedList[Any] = StampedList()
        self.webhooks: StampedList[tuple[str, str, dict[str, Any], int]] = StampedList()
        self.fake.calls = self.calls
        self.fake.webhooks_sent = self.webhooks
        self.fake.add_installation(INSTALLATION, REPO.split("/")[0])
        self.fake.add_repo(REPO, installation_id=INSTALLATION)
        self.fake.add_user(DECOY)
        self.runtime: Runtime | None = None
        self._site_runner: web.AppRunner | None = None
        self.bot_url = ""

    @property
    def database_path(self) -> Path:
        return self.workdir / "revbot.sqlite3"

    def env(self) -> dict[str, str]:
        """The bot's settings, as a deployment would set them (also the worker process's env)."""
        return {
            "APP_ID": str(APP_ID),
            "PRIVATE_KEY": self.fake.private_key_pem,
            "WEBHOOK_SECRET": self.secret,
            "GITHUB_API_URL": self.fake.base_url,
            "DATABASE_URL": f"sqlite:///{self.database_path}",
            "REVIEW_APPROVE": "true" if self.approve else "false",
            "LOG_LEVEL": "info",
            "HOST": "127.0.0.1",
        }

    async def start(self) -> None:
        await self.fake.start(port=0)
        settings, pem = load_settings(self.env())
        self.runtime = Runtime(
            settings,
            pem,
            worker_options=self.worker_options,
            run_worker=self.run_worker,
            identity_backoff=(0.05, 0.2),
        )
        await self.runtime.start()
        runner = web.AppRunner(self.runtime.web_app(), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self._site_runner = runner
        port = int(runner.addresses[0][1])
        self.bot_url = f"http://127.0.0.1:{port}{settings.webhook_path}"
        self.fake.webhook_url = self.bot_url

    async def stop(self) -> None:
        if self._site_runner is not None:
            await self._site_runner.cleanup()
            self._site_runner = None
        if self.runtime is not None:
            await self.runtime.stop()
            self.runtime = None
        await self.fake.stop()

    @property
    def store(self) -> Any:
        assert self.runtime is not None
        return self.runtime.store

    async def drain(self, within: float = 15.0) -> None:
        """Until quiet: every webhook the fake sent answered, and no job waiting, queued or running
        (an echo of a write can enqueue more work, so look a few times)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        quiet_rounds = 0
        while quiet_rounds < 3:
            if loop.time() > deadline:
                raise TimeoutError(f"the bot did not settle: {await self.store.jobs_by_status()}")
            await self.fake.settle(timeout=within)
            counts = await self.store.jobs_by_status()
            busy = sum(counts.get(status, 0) for status in ("waiting", "queued", "running"))
            quiet_rounds = quiet_rounds + 1 if busy == 0 else 0
            await asyncio.sleep(0.03)

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
