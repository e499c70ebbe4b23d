"""The bot, running for real against the fake GitHub: the harness every end-to-end test uses.

``BotHarness`` is the demo's harness (``app.demo.harness.BotAndFake``: the fake GitHub and the
bot's real ``Runtime`` on loopback ports, wired to each other, and ``drain()``) with GitHub's own
descriptions installed as the fake's validator, plus what only tests need: opening a PR in one
line, posting a hand-made signed delivery, and checking every answer against GitHub's
descriptions.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp

from app.demo.harness import APP_ID, BOT, FAST_WORKER, INSTALLATION, REPO, SLUG, BotAndFake, free_port
from app.guards import BotIdentity
from app.handlers.concern import OrderedRouter
from app.jobs.worker import WorkerOptions
from app.sandbox import Call, FakeGitHub
from app.sandbox.auth import generate_private_key_pem
from app.usecases.checks import CheckKind, check_name
from tests.conformance import GitHubConformance, validate_response

__all__ = [
    "APP_ID",
    "BOT",
    "FAST_WORKER",
    "INSTALLATION",
    "METRICS_TOKEN",
    "REPO",
    "SECRET",
    "SLUG",
    "BotHarness",
    "bot_thread_of",
    "free_port",
]

SECRET = "test webhook secret"
METRICS_TOKEN = "test metrics token"  # every test bot's, unless a test sets its own (or "")
# One App key for every fake of the process: generating an RSA key costs tens of milliseconds.
APP_KEY = generate_private_key_pem()

# GitHub answers with these although its REST description forbids them: an outdated review comment
# (its line no longer in the diff) has ``line`` and ``position`` null.
KNOWN_DRIFT = re.compile(r"^response(\[\d+\])?\.(line|position): None is not of type 'integer'$")


class BotHarness(BotAndFake):
    def __init__(
        self,
        tmp_path: Path,
        *,
        router: OrderedRouter | None = None,
        env: dict[str, str] | None = None,
        worker_options: WorkerOptions = FAST_WORKER,
        fake_port: int = 0,
        start_fake: bool = True,
        run_worker: bool = True,
        enterprise: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        fake = FakeGitHub(
            app_id=APP_ID,
            app_slug=SLUG,
            webhook_secret=SECRET,
            validator=GitHubConformance(),
            private_key_pem=APP_KEY,
            enterprise=enterprise,  # served under /api/v3 and /api/graphql, as GHES is
        )
        super().__init__(
            tmp_path,
            fake,
            secret=SECRET,
            # Readiness looks a settle time after an event: a day unless a test asks (the tests of
            # other concerns see nothing of it; tests/test_readiness_e2e.py moves a fake clock).
            env={"METRICS_TOKEN": METRICS_TOKEN, "READINESS_SETTLE_SECONDS": "86400", **(env or {})},
            router=router,
            worker_options=worker_options,
            run_worker=run_worker,
            fake_port=fake_port,
            start_fake=start_fake,
            clock=clock,
        )

    def open_pull(
        self,
        head_files: Mapping[str, str | None],
        *,
        base_files: Mapping[str, str | None] | None = None,
        author: str = "alice",
        branch: str = "feature",
        **options: Any,
    ) -> int:
        """A PR from ``branch`` (base files plus ``head_files``) into main; returns its number."""
        if "main" not in self.fake.world.repo(REPO).branches:
            self.fake.push(REPO, "main", base_files or {"README.md": "# widgets\n"})
        self.fake.push(REPO, branch, head_files)
        return int(self.fake.open_pull(REPO, head=branch, author=author, **options)["number"])

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

    async def health(self) -> tuple[int, dict[str, Any]]:
        """``/healthz`` with its details (asked with the test bots' token)."""
        headers = {"Authorization": f"Bearer {METRICS_TOKEN}"}
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                f"http://127.0.0.1:{self.bot_port}/healthz",
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=30),
            ) as response,
        ):
            return response.status, await response.json()

    def assert_conforms(self) -> None:
        """Nothing the bot sent broke GitHub's descriptions; every answer of the fake fits them
        (except where GitHub itself departs from its description, listed in KNOWN_DRIFT)."""
        assert self.fake.problems == []
        for call in self.fake.calls:
            if call.path != "/graphql" and call.response is not None and 200 <= call.status < 300:
                problems = validate_response(call.method, call.path, call.status, call.response)
                assert [p for p in problems if not KNOWN_DRIFT.search(p)] == [], call


@contextlib.asynccontextmanager
async def harness_with_decoy(tmp_path: Path, decoy: str = "revbot") -> AsyncIterator[BotHarness]:
    """A harness whose fake GitHub knows the App's decoy user; stopped after, and every request
    it made checked against GitHub's descriptions."""
    harness = BotHarness(tmp_path)
    harness.fake.add_user(decoy)
    yield harness
    await harness.stop()
    harness.assert_conforms()


REVIEW_CHECK = check_name(CheckKind.REVIEW, BotIdentity.from_slug(SLUG))


def bot_thread_of(fake: FakeGitHub, number: int, rule: str) -> int:
    """The root comment id of the bot's thread for ``rule`` on pull request ``number``."""
    world = fake.world
    for thread in world.threads_of(world.pull(world.repo(REPO), number)):
        root = world.review_comments[thread.comment_ids[0]]
        if root.user == BOT and f"`{rule}`" in root.body:
            return root.id
    raise AssertionError(f"the bot has no thread for {rule}")


def review_checks_completed(fake: FakeGitHub) -> list[Call]:
    """The writes that completed the bot's review check run: created completed in one POST
    (nothing to report while it runs), or a PATCH of a run it had created."""
    created = {
        int(c.response["id"])
        for c in fake.calls
        if c.method == "POST"
        and c.path.endswith("/check-runs")
        and (c.body or {}).get("name") == REVIEW_CHECK
        and isinstance(c.response, dict)
        and "id" in c.response
    }
    return [
        c
        for c in fake.calls
        if (c.body or {}).get("status") == "completed"
        and (
            (c.method == "POST" and c.path.endswith("/check-runs") and c.body.get("name") == REVIEW_CHECK)
            or (
                c.method == "PATCH"
                and c.path.rsplit("/", 1)[-1].isdigit()
                and int(c.path.rsplit("/", 1)[-1]) in created
            )
        )
    ]
