"""The bot, running for real against the fake GitHub over loopback: one harness for the demo and the tests.

``BotAndFake`` starts the fake GitHub (with one installation and one repository) and the bot's
real ``Runtime`` serving its webhook endpoint on a loopback port, wires each to the other, and
offers ``drain()``: wait until every webhook the fake sent was answered and every job the bot
queued has ended, repeatedly, until nothing moves (an echo of a write can enqueue more work).
The demo (``runner.Stage``) and the end-to-end tests (``tests/harness.py``) are thin layers on
it: the tests install GitHub's own descriptions as the fake's validator, the demo stamps times.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Self

from aiohttp import web
from sqlalchemy import and_, func, or_, select

from ..events import TIMER_EVENT
from ..github.ratelimit import Pacer
from ..handlers.concern import OrderedRouter
from ..jobs.worker import WorkerOptions
from ..runtime import Runtime, listen
from ..sandbox import FakeGitHub
from ..sandbox.server import ENTERPRISE_REST
from ..settings.config import Settings, load_settings
from ..store.schema import JobStatus, deliveries

APP_ID = 4242
SLUG = "revbot"
BOT = f"{SLUG}[bot]"
REPO = "octo/widgets"
INSTALLATION = 77

# The worker tuned for a bot that is watched closely: claims at once, polls often, retries fast.
FAST_WORKER = WorkerOptions(
    concurrency=8, lease_seconds=30, poll_seconds=0.05, claim_interval=0.0, backoff_base=0.05, backoff_cap=0.2
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BotAndFake:
    def __init__(
        self,
        workdir: Path,
        fake: FakeGitHub,
        *,
        secret: str,
        env: Mapping[str, str] | None = None,
        router: OrderedRouter | None = None,
        worker_options: WorkerOptions = FAST_WORKER,
        run_worker: bool = True,
        fake_port: int = 0,
        start_fake: bool = True,
        database_name: str = "bot.sqlite3",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.workdir = workdir
        self.fake = fake
        self.fake.add_installation(INSTALLATION, REPO.split("/")[0])
        self.fake.add_repo(REPO, installation_id=INSTALLATION)
        self.secret = secret
        self.extra_env = dict(env or {})
        self.router = router
        self.worker_options = worker_options
        self.run_worker = run_worker
        # 0: the kernel's choice when each starts (a port chosen early and bound later could be
        # taken meanwhile by another process of the test run). A fake the caller starts itself
        # needs both known before: they are chosen now.
        self.fake_port = fake_port or (0 if start_fake else free_port())
        self.start_fake = start_fake
        self.bot_port = 0 if start_fake else free_port()
        self.database_path = workdir / database_name
        self.clock = clock  # the bot's queue and the fake's timestamps (tests pass a fake one)
        fake.world.clock = clock
        self.pacer: Pacer | None = None  # the bot's pacing under GitHub's limits (None: its own)
        self.runtime: Runtime | None = None
        self._runner: web.AppRunner | None = None

    @property
    def webhook_url(self) -> str:
        return f"http://127.0.0.1:{self.bot_port}/api/github/webhooks"

    def env(self) -> dict[str, str]:
        """The bot's settings, as a deployment would set them (also a worker process's env)."""
        prefix = ENTERPRISE_REST if self.fake.enterprise else ""
        return {
            "APP_ID": str(APP_ID),
            "PRIVATE_KEY": self.fake.private_key_pem,
            "WEBHOOK_SECRET": self.secret,
            "GITHUB_API_URL": f"http://127.0.0.1:{self.fake_port}{prefix}",
            "DATABASE_URL": f"sqlite:///{self.database_path}",
            **self.extra_env,
        }

    def settings(self) -> tuple[Settings, str]:
        return load_settings(self.env())

    async def start(self) -> Self:
        if self.start_fake:
            base_url = await self.fake.start(port=self.fake_port)
            self.fake_port = int(base_url.rsplit(":", 1)[1])
        settings, pem = self.settings()
        self.runtime = Runtime(
            settings,
            pem,
            router=self.router,
            worker_options=self.worker_options,
            run_worker=self.run_worker,
            identity_backoff=(0.05, 0.2),
            clock=self.clock,
            pacer=self.pacer,
        )
        await self.runtime.start()
        self._runner = web.AppRunner(self.runtime.web_app(), access_log=None)
        await self._runner.setup()
        await listen(self._runner, host="127.0.0.1", port=self.bot_port, limits=self.runtime.http_limits())
        self.bot_port = int(self._runner.addresses[0][1])
        self.fake.webhook_url = self.webhook_url
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.runtime is not None:
            await self.runtime.stop()  # kept: its store stays readable for what happened
        await self.fake.stop()

    @property
    def store(self) -> Any:
        assert self.runtime is not None
        return self.runtime.store

    async def busy_jobs(self) -> int:
        """Jobs waiting, running, or queued and due (a timer due later is not work to wait for)."""
        d = deliveries.c
        now = self.clock()  # the store's clock (not ``store.now``, which a test may break on purpose)
        due = or_(
            d.status.in_((JobStatus.WAITING, JobStatus.RUNNING)),
            and_(d.status == JobStatus.QUEUED, d.run_after <= now),
        )
        async with self.store.backend.read() as conn:
            return int((await conn.execute(select(func.count()).where(due))).scalar_one())

    async def timers(self) -> list[float]:
        """When the bot's pending timers are due, soonest first."""
        d = deliveries.c
        timers = (d.status == JobStatus.QUEUED, d.event == TIMER_EVENT)
        query = select(d.run_after).where(*timers).order_by(d.run_after)
        async with self.store.backend.read() as conn:
            return [float(at) for (at,) in await conn.execute(query)]

    async def drain(self, within: float = 60.0) -> None:
        """Until quiet: the fake's webhooks answered and no job waiting, running or due.

        ``within`` is a deadline against hangs, generous so a loaded machine never trips it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        quiet_rounds = 0
        while quiet_rounds < 3:
            if loop.time() > deadline:
                raise TimeoutError(f"the bot did not settle: {await self.store.jobs_by_status()}")
            await self.fake.settle(timeout=within)
            busy = await self.busy_jobs()
            quiet_rounds = quiet_rounds + 1 if busy == 0 else 0
            await asyncio.sleep(0.03)
