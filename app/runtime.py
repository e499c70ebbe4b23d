"""Composition root: builds the running bot from settings, for ``serve``, ``worker`` and tests.

Nothing starts at import time. ``Runtime.start()`` opens the database (creating the schema),
the HTTP session, the ledger writer and, unless told otherwise, the in-process worker; the
identity lookup (``GET /app``) runs in the background so the webhook endpoint records deliveries
even while GitHub is unreachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Any

import aiohttp
import gidgethub
from aiohttp import web
from gidgethub import routing

from .auth import AppJWT, InstallationTokens
from .config import Settings, shutdown_budget
from .events import AnyEvent
from .github import AppClient, InstallationClient, transient_delay
from .guards import BotIdentity
from .handlers.common import AnalysisCache, RepoConfigs
from .housekeeping import INTERVAL_SECONDS, Housekeeping
from .metrics import metrics_view
from .proxy import start_proxy
from .recovery import DeliveryRecovery
from .review.engine import BuiltinReviewer
from .review.model import Reviewer
from .routing import Context
from .store import Ledger, Store
from .web import WebhookConfig, create_app
from .worker import Worker, WorkerOptions, backoff_delay

log = logging.getLogger(__name__)

API_TIMEOUT = aiohttp.ClientTimeout(total=30, connect=10)


class IdentityResolver:
    """Learns the App's slug from ``GET /app`` (or ``APP_SLUG``), retrying with backoff until it does."""

    def __init__(
        self,
        app_client: AppClient,
        *,
        slug: str | None,
        decoy_login: str | None,
        backoff_base: float = 1.0,
        backoff_cap: float = 60.0,
    ) -> None:
        self._client = app_client
        self._decoy = decoy_login
        self._base = backoff_base
        self._cap = backoff_cap
        self.known: BotIdentity | None = BotIdentity.from_slug(slug, decoy_login) if slug else None
        self._lock = asyncio.Lock()

    async def get(self) -> BotIdentity:
        async with self._lock:
            attempt = 0
            while self.known is None:
                attempt += 1
                try:
                    app = await self._client.get_app()
                except (gidgethub.GitHubException, aiohttp.ClientError, TimeoutError) as exc:
                    delay = backoff_delay(attempt, base=self._base, cap=self._cap)
                    if transient_delay(exc) is None:
                        log.error(
                            "GET /app failed (%s: %s); check APP_ID and the private key",
                            type(exc).__name__,
                            exc,
                        )
                    else:
                        log.warning(
                            "GitHub unreachable for GET /app (%s); retrying in %.1fs",
                            type(exc).__name__,
                            delay,
                        )
                    await asyncio.sleep(delay)
                    continue
                self.known = BotIdentity.from_slug(str(app["slug"]), self._decoy)
                log.info("running as %s (decoy %s)", self.known.bot_login, self.known.decoy_login)
            return self.known


class Runtime:
    def __init__(
        self,
        settings: Settings,
        private_key_pem: str,
        *,
        router: routing.Router | None = None,
        worker_options: WorkerOptions | None = None,
        run_worker: bool = True,
        identity_backoff: tuple[float, float] = (1.0, 60.0),
        sqlite_synchronous: str = "FULL",
        reviewer: Reviewer | None = None,
        housekeeping_interval: float = INTERVAL_SECONDS,
    ) -> None:
        if router is None:
            from .handlers import router as default_router

            router = default_router
        self.settings = settings
        self.store = Store(
            settings.sqlalchemy_url,
            sqlite_synchronous=sqlite_synchronous,
            pool_size=settings.database_pool_size,
        )
        self.ledger = Ledger(self.store)
        self._private_key_pem = private_key_pem
        self._router = router
        self._worker_options = worker_options
        self._run_worker = run_worker
        self._identity_backoff = identity_backoff
        self.reviewer: Reviewer = reviewer or self._default_reviewer()
        self.repo_configs = RepoConfigs()
        self.analyses = AnalysisCache()
        self.session: aiohttp.ClientSession | None = None
        self.identity: IdentityResolver | None = None
        self.tokens: InstallationTokens | None = None
        self.worker: Worker | None = None
        self._identity_task: asyncio.Task[BotIdentity] | None = None
        self._housekeeping_interval = housekeeping_interval
        self.housekeeping: Housekeeping | None = None

    def _default_reviewer(self) -> Reviewer:
        if self.settings.reviewer == "llm":
            from .review.llm import build_reviewer

            return build_reviewer(self.settings, store=self.store)  # its tables join the schema
        return BuiltinReviewer()

    async def start(self) -> None:
        await self.store.create_schema()
        self.session = aiohttp.ClientSession(timeout=API_TIMEOUT)
        app_client = AppClient(
            self.session,
            app_jwt=AppJWT(self.settings.app_id, self._private_key_pem),
            api_url=self.settings.github_api_url,
            slug=self.settings.app_slug,
        )
        self.tokens = InstallationTokens(app_client.mint_installation_token)
        base, cap = self._identity_backoff
        self.identity = IdentityResolver(
            app_client,
            slug=self.settings.app_slug,
            decoy_login=self.settings.decoy_login,
            backoff_base=base,
            backoff_cap=cap,
        )
        self._identity_task = asyncio.create_task(self.identity.get(), name="identity lookup")
        if self._run_worker:
            self.worker = Worker(
                self.store,
                self._router,
                identity=self.identity.get,
                context_for=self.context_for,
                options=self._worker_options
                or WorkerOptions(shutdown_grace=shutdown_budget(self.settings.shutdown_timeout)[1]),
            )
            self.worker.start()
        # Missed-delivery recovery and payload retention, now and every few minutes.
        recovery = DeliveryRecovery(self.store, app_client, on_recorded=self._wake_worker)
        self.housekeeping = Housekeeping(
            self.store,
            recovery,
            retention_days=self.settings.payload_retention_days,
            interval=self._housekeeping_interval,
        )
        self.housekeeping.start()

    def _wake_worker(self) -> None:
        if self.worker is not None:
            self.worker.wake()

    async def context_for(self, event: AnyEvent, identity: BotIdentity, received_at: float) -> Context:
        assert self.session is not None and self.tokens is not None and event.installation_id is not None
        gh = InstallationClient(
            self.session,
            installation_id=event.installation_id,
            tokens=self.tokens,
            api_url=self.settings.github_api_url,
            graphql_url=self.settings.graphql_url,
            slug=identity.slug,
        )
        return Context(
            gh=gh,
            identity=identity,
            settings=self.settings,
            reviewer=self.reviewer,
            repo_configs=self.repo_configs,
            analyses=self.analyses,
            received_at=received_at,
        )

    def web_app(self) -> web.Application:
        config = WebhookConfig(
            secret=self.settings.webhook_secret.get_secret_value().encode(), path=self.settings.webhook_path
        )
        app = create_app(
            config=config,
            store=self.store,
            ledger=self.ledger,
            on_recorded=self.worker.wake if self.worker else (lambda: None),
            health_extra=self._health,
        )
        token = self.settings.metrics_token.get_secret_value() if self.settings.metrics_token else None
        app.router.add_get("/metrics", metrics_view(self.store, token=token))
        return app

    def _health(self) -> dict[str, Any]:
        known = self.identity.known if self.identity else None
        health = {
            "app_slug": known.slug if known else None,
            "worker": self.worker is not None,
            "delivery_recovery": self.housekeeping.status() if self.housekeeping else None,
        }
        model = getattr(self.reviewer, "health", None)
        if model is not None:
            health["llm"] = model()  # the model provider's last answer: ok, or failing since when
        return health

    async def stop(self) -> None:
        if self.housekeeping is not None:
            await self.housekeeping.stop()
        if self.worker is not None:
            await self.worker.stop()
        if self._identity_task is not None and not self._identity_task.done():
            self._identity_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._identity_task
        if self.session is not None:
            await self.session.close()
        close = getattr(self.reviewer, "aclose", None)
        if close is not None:
            await close()
        await self.store.close()


async def _until_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")


async def serve(runtime: Runtime, *, host: str, port: int) -> None:
    """Run the web server (and the in-process worker) until SIGTERM/SIGINT.

    Shutdown order: stop accepting connections and finish in-flight requests (the ledger commits
    what it holds), then give running jobs their grace period, then close connections.
    """
    await runtime.start()
    drain, _grace = shutdown_budget(runtime.settings.shutdown_timeout)
    runner = web.AppRunner(runtime.web_app(), access_log=None, shutdown_timeout=drain)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    log.info("listening on http://%s:%d%s", host, port, runtime.settings.webhook_path)
    proxy = start_proxy(runtime.settings, host=host, port=port)
    try:
        await _until_signal()
    finally:
        if proxy is not None:
            await proxy.stop()
        await runner.cleanup()
        await runtime.stop()


async def work(runtime: Runtime) -> None:
    """Run only the worker (``python -m app worker``) until SIGTERM/SIGINT."""
    await runtime.start()
    try:
        await _until_signal()
    finally:
        await runtime.stop()
