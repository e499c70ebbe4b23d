"""The bot, running for real against the fake GitHub: the harness every end-to-end test uses.

``BotHarness`` starts the fake GitHub (with GitHub's own descriptions installed as its
validator) and the bot's real ``Runtime`` serving its webhook endpoint on a loopback port, wires
each to the other, and offers ``drain()``: wait until every webhook the fake sent was answered
and every job the bot queued has ended, repeatedly, until nothing moves (an echo of a write can
enqueue more work).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import re
import socket
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from gidgethub import routing

from app.config import Settings, load_settings
from app.runtime import Runtime, listen
from app.sandbox import FakeGitHub
from app.worker import WorkerOptions
from tests.conformance import GitHubConformance, validate_response

APP_ID = 4242
SLUG = "revbot"
BOT = f"{SLUG}[bot]"
SECRET = "test webhook secret"
REPO = "octo/widgets"
INSTALLATION = 77

# GitHub answers with these although its REST description forbids them: an outdated review comment
# (its line no longer in the diff) has ``line`` and ``position`` null.
KNOWN_DRIFT = re.compile(r"^response(\[\d+\])?\.(line|position): None is not of type 'integer'$")

FAST = WorkerOptions(
    concurrency=8, lease_seconds=30, poll_seconds=0.05, claim_interval=0.0, backoff_base=0.05, backoff_cap=0.2
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BotHarness:
    def __init__(
        self,
        tmp_path: Path,
        *,
        router: routing.Router | None = None,
        env: dict[str, str] | None = None,
        worker_options: WorkerOptions = FAST,
        fake_port: int = 0,
        start_fake: bool = True,
        run_worker: bool = True,
    ) -> None:
        self.fake = FakeGitHub(
            app_id=APP_ID, app_slug=SLUG, webhook_secret=SECRET, validator=GitHubConformance()
        )
        self.fake.add_installation(INSTALLATION, "octo")
        self.fake.add_repo(REPO, installation_id=INSTALLATION)
        self.tmp_path = tmp_path
        self.router = router
        self.extra_env = env or {}
        self.worker_options = worker_options
        self.fake_port = fake_port or free_port()
        self.start_fake = start_fake
        self.run_worker = run_worker
        self.bot_port = free_port()
        self.runtime: Runtime | None = None
        self._runner: web.AppRunner | None = None

    def open_pull(
        self,
        head_files: dict[str, str | None],
        *,
        base_files: dict[str, str | None] | None = None,
        author: str = "alice",
        branch: str = "feature",
        **options: Any,
    ) -> int:
        """A PR from ``branch`` (base files plus ``head_files``) into main; returns its number."""
        if "main" not in self.fake.world.repo(REPO).branches:
            self.fake.push(REPO, "main", base_files or {"README.md": "# widgets\n"})
        self.fake.push(REPO, branch, head_files)
        return int(self.fake.open_pull(REPO, head=branch, author=author, **options)["number"])

    @property
    def webhook_url(self) -> str:
        return f"http://127.0.0.1:{self.bot_port}/api/github/webhooks"

    def env(self) -> dict[str, str]:
        return {
            "APP_ID": str(APP_ID),
            "PRIVATE_KEY": self.fake.private_key_pem,
            "WEBHOOK_SECRET": SECRET,
            "GITHUB_API_URL": f"http://127.0.0.1:{self.fake_port}",
            "DATABASE_URL": f"sqlite:///{self.tmp_path / 'bot.sqlite3'}",
            **self.extra_env,
        }

    def settings(self) -> tuple[Settings, str]:
        return load_settings(self.env())

    async def start(self) -> BotHarness:
        self.fake.webhook_url = self.webhook_url
        if self.start_fake:
            await self.fake.start(port=self.fake_port)
        settings, pem = self.settings()
        self.runtime = Runtime(
            settings,
            pem,
            router=self.router,
            worker_options=self.worker_options,
            run_worker=self.run_worker,
            identity_backoff=(0.05, 0.2),
        )
        await self.runtime.start()
        self._runner = web.AppRunner(self.runtime.web_app(), access_log=None)
        await self._runner.setup()
        await listen(self._runner, host="127.0.0.1", port=self.bot_port, limits=self.runtime.http_limits())
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self.runtime is not None:
            await self.runtime.stop()
        await self.fake.stop()

    async def post_signed(self, event: str, payload: dict[str, Any], delivery_id: str) -> int:
        """Deliver a payload exactly as GitHub would (signed), bypassing the fake's own shaping."""
        body = json.dumps(payload).encode()
        headers = {
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery_id,
            "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
            "Content-Type": "application/json",
        }
        async with (
            aiohttp.ClientSession() as session,
            session.post(self.webhook_url, data=body, headers=headers) as response,
        ):
            return response.status

    @property
    def store(self) -> Any:
        assert self.runtime is not None
        return self.runtime.store

    async def drain(self, within: float = 60.0) -> None:
        """Until quiet: the fake's webhooks answered and no job waiting, queued or running.

        ``within`` is a deadline against hangs, generous so a loaded machine never trips it."""
        deadline = asyncio.get_running_loop().time() + within
        quiet_rounds = 0
        while quiet_rounds < 3:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"bot did not settle: {await self.store.jobs_by_status()}")
            await self.fake.settle(timeout=within)
            counts = await self.store.jobs_by_status()
            busy = sum(counts.get(status, 0) for status in ("waiting", "queued", "running"))
            quiet_rounds = quiet_rounds + 1 if busy == 0 else 0
            await asyncio.sleep(0.03)

    def assert_conforms(self) -> None:
        """Nothing the bot sent broke GitHub's descriptions; every answer of the fake fits them
        (except where GitHub itself departs from its description, listed in KNOWN_DRIFT)."""
        assert self.fake.problems == []
        for call in self.fake.calls:
            if call.path != "/graphql" and call.response is not None and 200 <= call.status < 300:
                problems = validate_response(call.method, call.path, call.status, call.response)
                assert [p for p in problems if not KNOWN_DRIFT.search(p)] == [], call
