"""The aiohttp application: the webhook endpoint and ``/healthz``.

The endpoint's whole job is to turn a delivery into a durable row and answer quickly: GitHub
waits 10 s and never retries by itself. Nothing on this path talks to GitHub. Order of checks:
size (413, before the body is buffered) -> signature (401, nothing recorded) -> headers and JSON
(400, logged) -> ``ping`` (200) -> ledger (202 new, 200 duplicate, 503 if the database failed).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from .config import MAX_BODY_BYTES
from .events import subject_of
from .logs import log_context
from .metrics import DELIVERIES, UNVERIFIED_EVENT
from .store import IncomingDelivery, Ledger, Store

log = logging.getLogger(__name__)

SIGNATURE_PREFIX = "sha256="
MAX_DELIVERY_ID_LENGTH = 255


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    secret: bytes
    path: str = "/api/github/webhooks"
    max_body_bytes: int = MAX_BODY_BYTES


def signature_matches(body: bytes, header: str | None, secret: bytes) -> bool:
    """Check ``X-Hub-Signature-256`` (``sha256=<hex>``) in constant time. Only SHA-256 is accepted."""
    if not header or not header.startswith(SIGNATURE_PREFIX):
        return False
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(header.removeprefix(SIGNATURE_PREFIX).lower(), expected)


class BodyTooLarge(Exception):
    pass


async def _read_capped(request: web.Request, limit: int) -> bytes:
    """Read the body, refusing as soon as it passes ``limit`` (chunked bodies have no length)."""
    if request.content_length is not None and request.content_length > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.readany():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _delivery_from(event: str, delivery_id: str, payload: dict[str, Any], body: bytes) -> IncomingDelivery:
    installation = payload.get("installation")
    repository = payload.get("repository")
    installation_id = installation.get("id") if isinstance(installation, dict) else None
    full_name = repository.get("full_name") if isinstance(repository, dict) else None
    action = payload.get("action")
    return IncomingDelivery(
        delivery_id=delivery_id,
        event=event,
        action=action if isinstance(action, str) else None,
        installation_id=installation_id if isinstance(installation_id, int) else None,
        repo=full_name.lower() if isinstance(full_name, str) else None,
        subject=subject_of(event, payload),
        payload=body,
    )


def _answer(http_status: int, **fields: Any) -> web.Response:
    return web.json_response(fields, status=http_status)


class WebhookView:
    """POST handler bound to its collaborators (no globals: several apps can live in one process)."""

    def __init__(self, config: WebhookConfig, ledger: Ledger, on_recorded: Callable[[], None]) -> None:
        self.config = config
        self.ledger = ledger
        self.on_recorded = on_recorded

    async def handle(self, request: web.Request) -> web.Response:
        try:
            body = await _read_capped(request, self.config.max_body_bytes)
        except BodyTooLarge:
            log.warning("delivery refused: body over %d bytes", self.config.max_body_bytes)
            DELIVERIES.labels(event=UNVERIFIED_EVENT, outcome="refused_too_large").inc()
            return _answer(413, error="payload too large")
        if not signature_matches(body, request.headers.get("X-Hub-Signature-256"), self.config.secret):
            log.warning("delivery refused: missing or wrong X-Hub-Signature-256")
            DELIVERIES.labels(event=UNVERIFIED_EVENT, outcome="refused_signature").inc()
            return _answer(401, error="bad signature")
        event = request.headers.get("X-GitHub-Event", "").strip()
        delivery_id = request.headers.get("X-GitHub-Delivery", "").strip()
        if not event or not delivery_id or len(delivery_id) > MAX_DELIVERY_ID_LENGTH:
            log.warning("delivery refused: missing X-GitHub-Event or X-GitHub-Delivery header")
            DELIVERIES.labels(event=event or "missing", outcome="refused_headers").inc()
            return _answer(400, error="missing X-GitHub-Event or X-GitHub-Delivery")
        with log_context(delivery_id=delivery_id, event=event):
            try:
                payload = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                log.warning("delivery refused: body is not JSON (%s)", exc)
                DELIVERIES.labels(event=event, outcome="refused_json").inc()
                return _answer(400, error="body is not JSON")
            if not isinstance(payload, dict):
                log.warning("delivery refused: JSON body is not an object")
                DELIVERIES.labels(event=event, outcome="refused_json").inc()
                return _answer(400, error="body is not a JSON object")
            if event == "ping":
                log.info("ping received (hook %s)", payload.get("hook_id"))
                DELIVERIES.labels(event=event, outcome="ping").inc()
                return _answer(200, status="pong")
            delivery = _delivery_from(event, delivery_id, payload, body)
            try:
                is_new = await self.ledger.record(delivery)
            except Exception:
                log.exception("could not record delivery")
                DELIVERIES.labels(event=event, outcome="error").inc()
                return _answer(503, error="could not record delivery")
            if not is_new:
                log.info("duplicate delivery ignored")
                DELIVERIES.labels(event=event, outcome="duplicate").inc()
                return _answer(200, status="duplicate")
            DELIVERIES.labels(event=event, outcome="accepted").inc()
            self.on_recorded()
            return _answer(202, status="queued")


def create_app(
    *,
    config: WebhookConfig,
    store: Store,
    ledger: Ledger,
    on_recorded: Callable[[], None] = lambda: None,
    health_extra: Callable[[], dict[str, Any]] = dict,
) -> web.Application:
    """Build the application; starting and stopping the ledger writer follows the app's lifecycle."""
    app = web.Application(client_max_size=config.max_body_bytes)

    async def healthz(_request: web.Request) -> web.Response:
        if await store.ping():
            return _answer(200, status="ok", database="ok", **health_extra())
        return _answer(503, status="unavailable", database="unreachable")

    async def ledger_lifecycle(_app: web.Application) -> Any:
        ledger.start()
        yield
        await ledger.stop()

    app.router.add_post(config.path, WebhookView(config, ledger, on_recorded).handle)
    app.router.add_get("/healthz", healthz)
    app.cleanup_ctx.append(ledger_lifecycle)
    return app
