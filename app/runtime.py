"""Composition root: builds the running bot from settings, for ``serve``, ``worker`` and tests.

Nothing starts at import time. ``Runtime.start()`` opens the database (creating the schema; a
PostgreSQL server that is not reachable yet is retried for ``DATABASE_STARTUP_TIMEOUT``), the
HTTP session, the ledger writer and, unless told otherwise, the in-process worker; the identity
lookup (``GET /app``) runs in the background so the webhook endpoint records deliveries even
while GitHub is unreachable. A start that cannot succeed raises :class:`StartupError`, whose
message is the one line ``python -m app`` prints.
"""

from __future__ import annotations

import asyncio
import errno
import gc
import logging
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import aiohttp
import gidgethub
from aiohttp import web

from .events import AnyEvent
from .github.app import AppClient
from .github.auth import AppJWT, InstallationTokens
from .github.cache import ResponseCache
from .github.client import RetryLater
from .github.errors import transient_delay
from .github.installation import InstallationClient
from .github.ratelimit import Pacer
from .guards import BotIdentity
from .handlers.concern import OrderedRouter
from .handlers.context import Context
from .intake.proxy import WebhookProxy, start_proxy
from .intake.recovery import DeliveryRecovery
from .jobs.pacing import AckFirst, backoff_delay
from .jobs.tasks import bounded, cancel_and_wait
from .jobs.timers import StoreTimers
from .jobs.worker import Worker, WorkerOptions, WorkerStatus
from .ops.housekeeping import INTERVAL_SECONDS, Housekeeping
from .review.core.model import Reviewer
from .settings.config import Settings, shutdown_budget
from .settings.logs import Outage, mask_configured, redact
from .store import DatabaseMemory, Ledger, Store, describe_database
from .store.backend import root_cause
from .usecases.bot import Bot, CommandBudget
from .usecases.learnings import DatabaseLearnings
from .usecases.pull import AnalysisCache, RepoConfigs
from .web import create_app
from .web.endpoint import WebhookConfig
from .web.health import HealthConfig
from .web.listener import GuardedSite, HttpLimits, bind
from .web.metrics import metrics_view

log = logging.getLogger(__name__)

GC_YOUNG_THRESHOLD = 20_000  # allocations between two scans of the youngest generation (default 700)

API_TIMEOUT = aiohttp.ClientTimeout(total=30, connect=10)
STOP_MARGIN = 1.0  # seconds for each step of shutdown after the worker's (see ``Runtime.stop``)


class StartupError(Exception):
    """The bot cannot start; the message names the problem in one line (exit status 1)."""


def one_line(exc: BaseException) -> str:
    cause = root_cause(exc)
    text = str(cause).strip().splitlines()
    return redact(f"{type(cause).__name__}: {text[0]}" if text else type(cause).__name__)[:300]


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
        self._unreachable = Outage(log, "GET /app (learning the App's identity)")

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
                        self._unreachable.failed(exc)
                    await asyncio.sleep(delay)
                    continue
                self._unreachable.recovered()
                self.known = BotIdentity.from_slug(str(app["slug"]), self._decoy)
                log.info("running as %s (decoy %s)", self.known.bot_login, self.known.decoy_login)
            return self.known


class Runtime:
    def __init__(
        self,
        settings: Settings,
        private_key_pem: str,
        *,
        router: OrderedRouter | None = None,
        worker_options: WorkerOptions | None = None,
        run_worker: bool = True,
        identity_backoff: tuple[float, float] = (1.0, 60.0),
        sqlite_synchronous: str = "FULL",
        reviewer: Reviewer | None = None,
        housekeeping_interval: float = INTERVAL_SECONDS,
        clock: Callable[[], float] = time.time,
        pacer: Pacer | None = None,
    ) -> None:
        """``pacer``: how GitHub requests keep under its rate limits (``ratelimit.Pacer``; tests
        pass one on a fake clock)."""
        if router is None:
            from .handlers import router as default_router

            router = default_router
        mask_configured(settings, private_key_pem)  # no configured secret in any log line
        self.settings = settings
        try:
            self.store = Store(
                settings.sqlalchemy_url,
                sqlite_synchronous=sqlite_synchronous,
                pool_size=settings.database_pool_size,
                clock=clock,  # due times and leases; tests pass a fake clock
            )
        except OSError as exc:
            raise StartupError(
                f"cannot prepare the database {describe_database(settings.sqlalchemy_url)}: {one_line(exc)}"
            ) from exc
        self.ledger = Ledger(self.store)
        self._private_key_pem = private_key_pem
        self._router = router
        self._worker_options = worker_options
        self._run_worker = run_worker
        self._identity_backoff = identity_backoff
        self.reviewer: Reviewer = reviewer or self._default_reviewer()
        self.repo_configs = RepoConfigs()
        self.analyses = AnalysisCache()
        self.learnings = DatabaseLearnings(self.store.backend)
        self.timers = StoreTimers(
            self.store, wake=self._wake_worker, bucket=settings.readiness_settle_seconds
        )
        self.session: aiohttp.ClientSession | None = None
        self.identity: IdentityResolver | None = None
        self.tokens: InstallationTokens | None = None
        self.worker: Worker | None = None
        # Shared by the webhook endpoint and the worker of this process: requests go first.
        self.ack_first = AckFirst()
        self.pacer = pacer or Pacer()  # per installation, shared by all its clients
        self.commands = CommandBudget()  # commands answered per person and per pull request
        # GET answers kept for conditional requests (a 304 costs no rate limit), per installation
        self.responses = (
            ResponseCache(self.settings.github_cache_bytes) if self.settings.github_cache_bytes else None
        )
        self._identity_task: asyncio.Task[BotIdentity] | None = None
        self._housekeeping_interval = housekeeping_interval
        self.housekeeping: Housekeeping | None = None

    def _default_reviewer(self) -> Reviewer:
        from .review.llm import configured_reviewer

        return configured_reviewer(self.settings, memory=DatabaseMemory(self.store.backend))

    async def open_database(self) -> None:
        """Create or check the schema; retry a database that is not reachable yet for up to
        ``DATABASE_STARTUP_TIMEOUT`` seconds (a platform often starts the app and its database
        together). Raises StartupError."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.database_startup_timeout
        where = describe_database(self.settings.sqlalchemy_url)
        attempt = 0
        while True:
            try:
                await self.store.create_schema()
            except Exception as exc:
                attempt += 1
                left = deadline - loop.time()
                if not self.store.backend.not_reachable_yet(exc) or left <= 0:
                    raise StartupError(f"database {where} unusable: {one_line(exc)}") from exc
                if attempt == 1:
                    log.warning(
                        "database %s not reachable yet (%s); retrying for up to %.0fs",
                        where,
                        one_line(exc),
                        left,
                    )
                await asyncio.sleep(min(left, backoff_delay(attempt, base=0.5, cap=5.0)))
                continue
            if attempt:
                log.info("database %s reachable after %d attempt(s)", where, attempt + 1)
            return

    async def start(self) -> None:
        await self.open_database()
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
                ack_first=self.ack_first,
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
        delay = self.pacer.admission(event.installation_id, event.delivery_id)
        if delay > 0:  # the installation's writes are spent for now: no worker waits for them
            raise RetryLater(delay, f"installation {event.installation_id} at its pace of writes")
        gh = InstallationClient(
            self.session,
            installation_id=event.installation_id,
            tokens=self.tokens,
            api_url=self.settings.github_api_url,
            graphql_url=self.settings.graphql_url,
            slug=identity.slug,
            pacer=self.pacer,
            cache=self.responses.for_installation(event.installation_id) if self.responses else None,
        )
        bot = Bot(
            identity=identity,
            settings=self.settings,
            reviewer=self.reviewer,
            repo_configs=self.repo_configs,
            analyses=self.analyses,
            learnings=self.learnings,
            timers=self.timers,
            writes=self.pacer,
            commands=self.commands,
        )
        return Context(gh=gh, bot=bot, received_at=received_at)

    def web_app(self) -> web.Application:
        s = self.settings
        token = s.metrics_token.get_secret_value() if s.metrics_token else None
        config = WebhookConfig(
            secret=s.webhook_secret.get_secret_value().encode(),
            previous_secret=(
                s.webhook_secret_previous.get_secret_value().encode() if s.webhook_secret_previous else None
            ),
            path=s.webhook_path,
            body_budget_bytes=s.http_body_budget_bytes,
            body_budget_wait=s.http_body_budget_wait,
            body_timeout=s.http_body_timeout,
        )
        app = create_app(
            config=config,
            store=self.store,
            ledger=self.ledger,
            on_recorded=self.worker.wake if self.worker else (lambda: None),
            health_extra=self._health,
            worker_status=self._worker_status,
            health=HealthConfig(
                worker_stall_seconds=s.health_worker_stall_seconds,
                queue_delay_seconds=s.health_queue_delay_seconds,
            ),
            ack_first=self.ack_first,
            details_token=token,
        )
        app.router.add_get("/metrics", self._metrics_view())
        return app

    def _metrics_view(self) -> Callable[[web.Request], Awaitable[web.Response]]:
        token = self.settings.metrics_token.get_secret_value() if self.settings.metrics_token else None
        return metrics_view(self.store, token=token, public=self.settings.metrics_public)

    def metrics_app(self) -> web.Application:
        """What a separate ``worker`` process serves on ``WORKER_METRICS_PORT``: its own
        ``/metrics`` (its jobs, reviews and GitHub calls are counted in its own process)."""
        app = web.Application()
        app.router.add_get("/metrics", self._metrics_view())
        return app

    def http_limits(self) -> HttpLimits:
        s = self.settings
        return HttpLimits(
            max_connections=s.http_max_connections,
            header_timeout=s.http_header_timeout,
            keepalive_timeout=s.http_keepalive_timeout,
        )

    def _worker_status(self) -> WorkerStatus | None:
        return self.worker.status() if self.worker else None

    def _health(self) -> dict[str, Any]:
        known = self.identity.known if self.identity else None
        health: dict[str, Any] = {
            "app_slug": known.slug if known else None,
            "delivery_recovery": self.housekeeping.status() if self.housekeeping else None,
        }
        model = self.reviewer.health()
        if model is not None:
            health["llm"] = dict(model)  # the model provider's last answer: ok, or failing since when
        return health

    async def stop(self) -> None:
        """Stop everything this runtime started. Bounded whatever the database or GitHub do: the
        worker's grace plus a few seconds (``STOP_MARGIN`` per step), so SIGTERM during a frozen
        database still ends the process within ``SHUTDOWN_TIMEOUT`` and a little."""
        if self.housekeeping is not None:
            await self._bounded("background housekeeping", self.housekeeping.stop())
        if self.worker is not None:
            options = self.worker.options
            within = options.shutdown_grace + 2 * options.stop_margin + STOP_MARGIN
            await self._bounded("the worker", self.worker.stop(), within=within)
        if self._identity_task is not None:
            await cancel_and_wait(self._identity_task, within=STOP_MARGIN)
        if self.session is not None:
            await self._bounded("the HTTP session", self.session.close())
        await self._bounded("the reviewer", self.reviewer.aclose())
        await self._bounded("the database connections", self.store.close())

    @staticmethod
    async def _bounded(what: str, step: Coroutine[Any, Any, None], *, within: float = STOP_MARGIN) -> None:
        try:
            await bounded(step, within=within)
        except TimeoutError:
            log.warning("shutdown: %s did not stop within %.0fs; going on without it", what, within)


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _unless_stopped(stop: asyncio.Event, step: Coroutine[Any, Any, None]) -> bool:
    """Run a startup step; a signal meanwhile abandons it (False) so SIGTERM never waits on a
    database that is not there."""
    task = asyncio.ensure_future(step)
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if task.done():
        task.result()
        return True
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return False


def _cannot_listen(host: str, port: int, exc: OSError) -> StartupError:
    reason = "address already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
    return StartupError(f"cannot listen on {host}:{port}: {reason}")


async def listen(
    runner: web.AppRunner, *, host: str, port: int, limits: HttpLimits, sock: socket.socket | None = None
) -> GuardedSite:
    """Serve the app on a guarded site (on ``sock`` if already bound); a port that cannot be
    bound is a StartupError."""
    site = GuardedSite(runner, host, port, limits=limits, sock=sock)
    try:
        await site.start()
    except OSError as exc:
        raise _cannot_listen(host, port, exc) from exc
    return site


def settle_garbage_collector() -> None:
    """Once started: move what startup built (modules, settings, the router, pools) out of the
    collector's reach, and scan the youngest generation less often.

    Every request and job allocates and frees thousands of objects (a job parses a whole
    payload); with the default threshold CPython scans its youngest objects every 700 net
    allocations, and now and then every object it tracks, most of which live for good. Measured
    with ``bench/compare.py``'s load (SQLite, one core, c64): p99 of the answers 45-54 ms without
    this, 16-21 ms with it, and 5-15% more deliveries a second. Short-lived objects are freed by
    reference counting; cycles are still collected, only later.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


async def serve(runtime: Runtime, *, host: str, port: int) -> None:
    """Run the web server (and the in-process worker, unless ``--no-worker``) until SIGTERM/SIGINT.

    The port is bound first, so a port in use stops the start before the worker claims anything.
    Shutdown order: stop accepting connections and finish in-flight requests (the ledger commits
    what it holds), then give running jobs their grace period, then close connections.
    """
    limits = runtime.http_limits()
    drain, _grace = shutdown_budget(runtime.settings.shutdown_timeout)
    try:
        sock = bind(host, port, backlog=limits.backlog)
    except OSError as exc:
        raise _cannot_listen(host, port, exc) from exc
    stop = _stop_on_signals()
    runner: web.AppRunner | None = None
    proxy: WebhookProxy | None = None
    try:
        if await _unless_stopped(stop, runtime.start()):
            runner = web.AppRunner(runtime.web_app(), access_log=None, shutdown_timeout=drain)
            await runner.setup()
            await listen(runner, host=host, port=port, limits=limits, sock=sock)
            alone = "" if runtime.worker else " (no worker here: `python -m app worker` runs the jobs)"
            log.info("listening on http://%s:%d%s%s", host, port, runtime.settings.webhook_path, alone)
            settle_garbage_collector()
            proxy = start_proxy(runtime.settings, host=host, port=port)
            await stop.wait()
        log.info("shutting down")
    finally:
        if proxy is not None:
            await proxy.stop()
        if runner is not None:
            await runner.cleanup()
        sock.close()
        await runtime.stop()


async def work(runtime: Runtime) -> None:
    """Run only the worker (``python -m app worker``) until SIGTERM/SIGINT; with
    ``WORKER_METRICS_PORT``, serve its ``/metrics`` there (bound first, like ``serve``'s port)."""
    host, port = runtime.settings.host, runtime.settings.worker_metrics_port
    sock = None
    if port is not None:
        try:
            sock = bind(host, port, backlog=128)
        except OSError as exc:
            raise _cannot_listen(host, port, exc) from exc
    stop = _stop_on_signals()
    runner: web.AppRunner | None = None
    try:
        if await _unless_stopped(stop, runtime.start()):
            if sock is not None:
                runner = web.AppRunner(runtime.metrics_app(), access_log=None)
                await runner.setup()
                await web.SockSite(runner, sock).start()
                log.info("worker metrics on http://%s:%d/metrics", host, port)
            settle_garbage_collector()
            await stop.wait()
        log.info("shutting down")
    finally:
        if runner is not None:
            await runner.cleanup()
        if sock is not None:
            sock.close()
        await runtime.stop()
