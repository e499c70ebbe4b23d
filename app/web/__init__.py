"""The HTTP side, the bot's door, composed once here.

The webhook endpoint (``endpoint.py``: verify, record in the ledger under the delivery's queue
key, ``subjects.py``, answer at once, within its body budget, ``budget.py``), ``/healthz``
(``health.py``) and the bounded listening socket (``listener.py``); ``/metrics`` (``metrics.py``)
the runtime adds, here and on a separate worker's own port.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from ..jobs.pacing import AckFirst
from ..jobs.worker import WorkerStatus
from ..store import Ledger, Store
from .budget import BODY_BUDGET, BodyBudget
from .endpoint import WebhookConfig, WebhookView
from .health import HealthConfig, HealthView
from .listener import connection_of


@web.middleware
async def _track_requests(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Tell the connection guard (app/intake/listener.py) a request is being handled: not idle, so not
    evictable, and no longer subject to the header timeout."""
    connection = connection_of(request)
    if connection is not None:
        connection.request_started()
    try:
        return await handler(request)
    finally:
        if connection is not None:
            connection.request_finished()


def create_app(
    *,
    config: WebhookConfig,
    store: Store,
    ledger: Ledger,
    on_recorded: Callable[[], None] = lambda: None,
    health_extra: Callable[[], dict[str, Any]] = dict,
    worker_status: Callable[[], WorkerStatus | None] = lambda: None,
    health: HealthConfig | None = None,
    budget: BodyBudget | None = None,
    ack_first: AckFirst | None = None,
    details_token: str | None = None,
) -> web.Application:
    """Build the application; starting and stopping the ledger writer follows the app's lifecycle.
    ``details_token``: what ``/healthz`` wants before it shows its details (METRICS_TOKEN)."""
    app = web.Application(client_max_size=config.max_body_bytes, middlewares=[_track_requests])
    healthz = HealthView(
        store,
        config=health or HealthConfig(),
        worker_status=worker_status,
        extra=health_extra,
        token=details_token,
    )
    view = WebhookView(
        config, ledger, on_recorded, budget or BodyBudget(config.body_budget_bytes), ack_first or AckFirst()
    )
    app[BODY_BUDGET] = view.budget

    async def lifecycle(_app: web.Application) -> Any:
        ledger.start()
        yield
        await ledger.stop()
        await healthz.close()

    app.router.add_post(config.path, view.handle)
    app.router.add_get("/healthz", healthz.handle)
    app.cleanup_ctx.append(lifecycle)
    return app
