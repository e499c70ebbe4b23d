"""The webhook endpoint: a delivery in, a durable row out, answered quickly.

GitHub waits 10 s and never retries by itself. Nothing on this path talks to GitHub. Order of
checks:

1. size: a declared length over the cap is 413 before a byte of the body is read;
2. signature header: missing or not ``sha256=<64 hex>`` is 401, and the body is never read;
3. memory: the body's bytes, as they arrive, are reserved from a process-wide budget of
   in-flight body bytes (``budget.py``); when it is spent the request waits briefly, then gets
   503 with ``Retry-After``;
4. body: read with a deadline (408 when it stalls), hashed (HMAC) while it streams; a wrong
   signature is 401 and nothing is recorded;
5. headers, JSON and every value bound for the ledger (lengths from the ``deliveries`` table,
   integer ranges, NUL characters): 400 with the reason, logged; so one bad delivery can never
   fail the batch its neighbours are committed in;
6. ``ping`` (200) -> ledger (202 new, 200 duplicate, 503 if the database failed).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError

from ..events import NUMBER_AT, TIMER_EVENTS
from ..jobs.pacing import AckFirst
from ..metrics import DELIVERIES, UNVERIFIED_EVENT, WEBHOOK_PREVIOUS_SECRET, child
from ..settings.config import DEFAULT_BODY_BUDGET_BYTES, MAX_BODY_BYTES
from ..settings.logs import describe_failure, log_context
from ..store import IncomingDelivery, Ledger, deliveries
from .budget import BodyBudget, Reservation
from .subjects import subject_of

log = logging.getLogger(__name__)

SIGNATURE_PREFIX = "sha256="
SIGNATURE_HEADER = re.compile(r"sha256=[0-9a-fA-F]{64}")
BIGINT_MAX = 2**63 - 1  # installation ids are stored as BIGINT


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    secret: bytes
    # During a rotation GitHub may still deliver with the old secret (deliveries already queued,
    # redeliveries): it is tried only after the current one fails, so it costs nothing otherwise.
    previous_secret: bytes | None = None
    path: str = "/api/github/webhooks"
    max_body_bytes: int = MAX_BODY_BYTES
    body_budget_bytes: int = DEFAULT_BODY_BUDGET_BYTES  # request bodies held at once, all requests
    body_budget_wait: float = 5.0  # how long a body waits for budget before 503
    body_timeout: float = 30.0  # from the first body read to the last byte


def signature_matches(body: bytes, header: str | None, secret: bytes) -> bool:
    """Check ``X-Hub-Signature-256`` (``sha256=<hex>``) in constant time. Only SHA-256 is accepted."""
    if not header or not header.startswith(SIGNATURE_PREFIX):
        return False
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(header.removeprefix(SIGNATURE_PREFIX).lower(), expected)


class Refused(Exception):
    """A delivery answered with an error: the HTTP status and the reason given to the sender."""

    def __init__(
        self, status: int, error: str, *, retry_after: int | None = None, outcome: str | None = None
    ) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.retry_after = retry_after
        # the ``outcome`` label of revbot_webhook_deliveries_total
        self.outcome = outcome or REFUSAL_OUTCOMES.get(status, "refused_invalid")


REFUSAL_OUTCOMES = {
    401: "refused_signature",
    408: "refused_timeout",
    413: "refused_too_large",
    503: "refused_busy",
}


# ------------------------------------------------------------------------------- validation
def _column_length(name: str) -> int:
    length = getattr(deliveries.c[name].type, "length", None)
    assert isinstance(length, int), name
    return length


DELIVERY_ID_LENGTH = _column_length("delivery_id")
EVENT_LENGTH = _column_length("event")
ACTION_LENGTH = _column_length("action")
REPO_LENGTH = _column_length("repo")
SUBJECT_LENGTH = _column_length("subject")
# Header values reach Python decoded with surrogate escapes when they are not UTF-8: accept only
# what GitHub sends (GUIDs, snake_case event names) so that nothing undecodable reaches the ledger.
_DELIVERY_ID = re.compile(rf"[\x20-\x7e]{{1,{DELIVERY_ID_LENGTH}}}")
_EVENT = re.compile(rf"[A-Za-z0-9_.-]{{1,{EVENT_LENGTH}}}")


def delivery_headers(event: str | None, delivery_id: str | None) -> tuple[str, str]:
    """``X-GitHub-Event`` and ``X-GitHub-Delivery``, checked; raises Refused (400)."""
    event = (event or "").strip()
    delivery_id = (delivery_id or "").strip()
    if not event or not delivery_id:
        raise Refused(400, "missing X-GitHub-Event or X-GitHub-Delivery", outcome="refused_headers")
    if not _DELIVERY_ID.fullmatch(delivery_id):
        raise Refused(
            400,
            f"X-GitHub-Delivery: expected 1-{DELIVERY_ID_LENGTH} printable ASCII characters",
            outcome="refused_headers",
        )
    if not _EVENT.fullmatch(event):
        raise Refused(
            400,
            f"X-GitHub-Event: expected 1-{EVENT_LENGTH} letters, digits, '_', '.' or '-'",
            outcome="refused_headers",
        )
    if event in TIMER_EVENTS:
        # Jobs the bot gives itself (readiness timers) are recorded by the store, never posted.
        raise Refused(400, f"X-GitHub-Event: {event} is the bot's own", outcome="refused_headers")
    return event, delivery_id


def _text(value: Any, field: str, max_length: int) -> str | None:
    """A string bound for a text column: no NUL (PostgreSQL refuses it), at most ``max_length``."""
    if not isinstance(value, str):
        return None
    if "\x00" in value:
        raise Refused(400, f"{field}: contains a NUL character")
    if len(value) > max_length:
        raise Refused(400, f"{field}: longer than {max_length} characters")
    return value


def _installation_id(installation: Any) -> int | None:
    value = installation.get("id") if isinstance(installation, dict) else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= BIGINT_MAX:
        raise Refused(400, f"installation.id: expected an integer from 1 to {BIGINT_MAX}")
    return value


def incoming_delivery(
    event: str, delivery_id: str, payload: dict[str, Any], body: bytes, digest: str | None = None
) -> IncomingDelivery:
    """The ledger's view of a verified delivery, every value checked against its column; raises
    Refused (400) naming the first value the ledger could not hold."""
    repository = payload.get("repository")
    full_name = _text(
        repository.get("full_name") if isinstance(repository, dict) else None,
        "repository.full_name",
        REPO_LENGTH,
    )
    repo = full_name.lower() if full_name is not None else None
    if repo is not None and len(repo) > REPO_LENGTH:  # lower-casing can lengthen some letters
        raise Refused(400, f"repository.full_name: longer than {REPO_LENGTH} characters")
    subject = _text(subject_of(event, payload), "subject (repository and number)", SUBJECT_LENGTH)
    assert subject is not None  # subject_of always returns a string
    return IncomingDelivery(
        delivery_id=delivery_id,
        event=event,
        action=_text(payload.get("action"), "action", ACTION_LENGTH),
        installation_id=_installation_id(payload.get("installation")),
        repo=repo,
        subject=subject,
        payload=body,
        body_digest=bytes.fromhex(digest) if digest else None,  # a replayed body is a duplicate
    )


# ------------------------------------------------------------------------------- envelope
# What the ledger reads of a body, and nothing more. msgspec checks the whole document is JSON
# but builds objects only for these fields, in a third of the time a full parse takes and with
# none of its thousand-odd objects (the worker parses the whole payload later). Each field takes
# any JSON value, as a full parse would: what a value must be is checked afterwards, with the
# same answers either way.


class _Numbered(msgspec.Struct, omit_defaults=True):
    number: Any = None


class _Check(msgspec.Struct, omit_defaults=True):
    pull_requests: Any = None


class _Repository(msgspec.Struct, omit_defaults=True):
    full_name: Any = None


class _Installation(msgspec.Struct, omit_defaults=True):
    id: Any = None


_ANY_OTHER = str | int | float | bool | list[Any] | None  # a field of an odd shape, kept as it is
# The objects that name a PR, from the one table of where payloads put its number
# (``events.NUMBER_AT``): a struct per object, built once at import, as fast as a written one.
_NAMING = {at.key: _Check if at.listed else _Numbered for at in NUMBER_AT.values()}
_Envelope = msgspec.defstruct(
    "_Envelope",
    [
        ("action", Any, None),
        ("hook_id", Any, None),
        ("number", Any, None),
        ("installation", _Installation | _ANY_OTHER, None),
        ("repository", _Repository | _ANY_OTHER, None),
        *((key, kind | _ANY_OTHER, None) for key, kind in _NAMING.items()),
    ],
    omit_defaults=True,
)


_ENVELOPE = msgspec.json.Decoder(_Envelope)


def envelope(body: bytes) -> dict[str, Any]:
    """The fields of a delivery's body that the ledger and ``subject_of`` read, as the plain
    mappings a full parse would give (absent and null fields left out); raises Refused (400)."""
    try:
        decoded = _ENVELOPE.decode(body)
    except msgspec.ValidationError as exc:  # the only way this type fails: not an object
        raise Refused(400, "body is not a JSON object", outcome="refused_json") from exc
    except msgspec.DecodeError as exc:
        raise Refused(400, "body is not JSON", outcome="refused_json") from exc
    fields: dict[str, Any] = msgspec.to_builtins(decoded)
    return fields


async def _read_body(
    request: web.Request, config: WebhookConfig, reservation: Reservation
) -> tuple[bytes, str]:
    """The body and its HMAC-SHA256, computed while it streams; raises Refused (413, 408, 503).

    Budget is taken for bytes as they arrive, never for a declared length: a client that
    promises 25 MiB and sends nothing holds nothing."""
    mac = hmac.new(config.secret, digestmod=hashlib.sha256)
    chunks: list[bytes] = []
    size = 0
    # A body that has arrived whole (most do) needs no deadline: a timer per request is a few
    # percent of the endpoint's CPU under load.
    deadline = contextlib.nullcontext() if request.content.is_eof() else asyncio.timeout(config.body_timeout)
    try:
        async with deadline:
            while chunk := await request.content.readany():
                size += len(chunk)
                if size > config.max_body_bytes:
                    raise Refused(413, "payload too large")
                if not await reservation.cover(size):
                    raise Refused(
                        503,
                        "busy: too many request bodies in flight",
                        retry_after=max(1, math.ceil(reservation.wait)),
                    )
                mac.update(chunk)
                chunks.append(chunk)
    except TimeoutError:
        raise Refused(408, f"request body not received within {config.body_timeout:g}s") from None
    except ConnectionError:
        raise Refused(400, "connection closed before the body was complete") from None
    except RequestPayloadError:
        raise Refused(400, "malformed request body") from None
    return b"".join(chunks), mac.hexdigest()


def _answer(http_status: int, **fields: Any) -> web.Response:
    return web.json_response(fields, status=http_status)


# The answer to nearly every delivery, encoded once (a Response itself is per request).
_QUEUED_BODY = json.dumps({"status": "queued"}).encode()


def _queued() -> web.Response:
    return web.Response(body=_QUEUED_BODY, status=202, content_type="application/json", charset="utf-8")


def _refusal(refused: Refused) -> web.Response:
    response = _answer(refused.status, error=refused.error)
    if refused.retry_after is not None:
        response.headers["Retry-After"] = str(refused.retry_after)
    if refused.status in (408, 413, 503):
        response.force_close()  # the rest of the body is not wanted: do not keep the connection
    return response


class WebhookView:
    """POST handler bound to its collaborators (no globals: several apps can live in one process)."""

    def __init__(
        self,
        config: WebhookConfig,
        ledger: Ledger,
        on_recorded: Callable[[], None],
        budget: BodyBudget,
        ack_first: AckFirst,
    ) -> None:
        self.config = config
        self.ledger = ledger
        self.on_recorded = on_recorded
        self.budget = budget
        self.ack_first = ack_first

    async def handle(self, request: web.Request) -> web.Response:
        reservation = Reservation(self.budget, self.config.body_budget_wait)
        # Until the delivery is handed to the ledger, jobs wait (see ``AckFirst``).
        handed_over = self.ack_first.request_started()
        try:
            return await self._handle(request, reservation, handed_over)
        except Refused as refused:  # before the signature and headers are known good
            log.warning("delivery refused: %s (%d)", refused.error, refused.status)
            child(DELIVERIES, UNVERIFIED_EVENT, refused.outcome).inc()
            return _refusal(refused)
        finally:
            handed_over()
            reservation.release()

    async def _handle(
        self, request: web.Request, reservation: Reservation, handed_over: Callable[[], None]
    ) -> web.Response:
        if request.content_length is not None and request.content_length > self.config.max_body_bytes:
            raise Refused(413, "payload too large")
        signature = request.headers.get("X-Hub-Signature-256", "").strip()
        if not SIGNATURE_HEADER.fullmatch(signature):
            # Refused before the body is read: an unsigned body costs no memory.
            raise Refused(401, "bad signature")
        body, digest = await _read_body(request, self.config, reservation)
        if not hmac.compare_digest(signature.removeprefix(SIGNATURE_PREFIX).lower(), digest):
            previous = self.config.previous_secret
            if previous is None or not signature_matches(body, signature, previous):
                raise Refused(401, "bad signature")
            # Counted so an operator sees when the old secret stops being used and can unset it.
            WEBHOOK_PREVIOUS_SECRET.inc()
        event, delivery_id = delivery_headers(
            request.headers.get("X-GitHub-Event"), request.headers.get("X-GitHub-Delivery")
        )
        with log_context(delivery_id=delivery_id, event=event):
            try:
                return await self._accept(event, delivery_id, body, handed_over, digest)
            except Refused as refused:
                log.warning("delivery refused: %s (%d)", refused.error, refused.status)
                child(DELIVERIES, event, refused.outcome).inc()
                return _refusal(refused)

    async def _accept(
        self, event: str, delivery_id: str, body: bytes, handed_over: Callable[[], None], digest: str
    ) -> web.Response:
        """A delivery whose signature is good: parse, check every value, record, answer."""
        payload = envelope(body)
        if event == "ping":
            log.info("ping received (hook %s)", payload.get("hook_id"))
            child(DELIVERIES, event, "ping").inc()
            return _answer(200, status="pong")
        delivery = incoming_delivery(event, delivery_id, payload, body, digest)
        handed_over()
        try:
            is_new = await self.ledger.record(delivery)
        except Exception as exc:  # noqa: BLE001 - any database failure is a 503, logged
            log.warning("could not record delivery: %s", describe_failure(exc))
            child(DELIVERIES, event, "error").inc()
            return _answer(503, error="could not record delivery")
        if not is_new:
            log.info("duplicate delivery ignored")
            child(DELIVERIES, event, "duplicate").inc()
            return _answer(200, status="duplicate")
        child(DELIVERIES, event, "accepted").inc()
        self.on_recorded()
        return _queued()
