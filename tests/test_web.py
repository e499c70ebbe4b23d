"""Every answer of the webhook endpoint's contract, over real HTTP, with real signatures."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from app.jobs.pacing import AckFirst
from app.jobs.worker import WorkerStatus
from app.store import Ledger, QueueStats, Store, decompress_payload
from app.web import create_app
from app.web.budget import BODY_BUDGET, BodyBudget
from app.web.endpoint import (
    Refused,
    WebhookConfig,
    delivery_headers,
    envelope,
    incoming_delivery,
    signature_matches,
)
from app.web.health import HealthConfig, health_problems
from tests.conftest import FakeClock, until

SECRET = b"It's a Secret to Everybody"
PATH = "/api/github/webhooks"
EXAMPLES = Path(__file__).parent / "fixtures" / "github" / "webhooks" / "examples"

ClientFactory = Callable[[web.Application], Awaitable[TestClient[Any, Any]]]


def sign(body: bytes, secret: bytes = SECRET) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def headers(
    body: bytes, *, event: str = "pull_request", delivery: str = "d-1", **extra: str
) -> dict[str, str]:
    result = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": sign(body),
        "Content-Type": "application/json",
    }
    result.update(extra)
    return {k: v for k, v in result.items() if v}


def example(event: str, name: str) -> bytes:
    return (EXAMPLES / event / name).read_bytes()


def copy_of(body: bytes, n: int) -> bytes:
    """``body`` as a distinct delivery: GitHub never sends one body twice under two ids (a body
    seen before under another id is a replay, answered as a duplicate)."""
    return body.rstrip().removesuffix(b"}") + b', "copy": %d}' % n


class Harness:
    def __init__(self, client: TestClient[Any, Any], store: Store) -> None:
        self.client = client
        self.store = store
        self.wakeups = 0

    async def post(self, body: bytes, hdrs: dict[str, str]) -> tuple[int, Any]:
        async with self.client.post(PATH, data=body, headers=hdrs) as response:
            return response.status, await response.json()


@pytest.fixture
async def harness(store: Store, aiohttp_client: ClientFactory) -> AsyncIterator[Harness]:
    ledger = Ledger(store)
    holder: list[Harness] = []

    def woke() -> None:
        holder[0].wakeups += 1

    app = create_app(
        config=WebhookConfig(secret=SECRET, path=PATH, max_body_bytes=64 * 1024),
        store=store,
        ledger=ledger,
        on_recorded=woke,
    )
    client = await aiohttp_client(app)
    holder.append(Harness(client, store))
    yield holder[0]


async def test_a_signed_delivery_is_recorded_then_answered_202(harness: Harness) -> None:
    body = example("pull_request", "review_requested.payload.json")
    status, answer = await harness.post(body, headers(body, delivery="72d3162e-cc78-11e3-81ab-4c9367dc0958"))
    assert (status, answer) == (202, {"status": "queued"})
    row = await harness.store.delivery("72d3162e-cc78-11e3-81ab-4c9367dc0958")
    assert row is not None
    assert (row["event"], row["action"], row["repo"], row["status"]) == (
        "pull_request",
        "review_requested",
        "codertocat/hello-world",
        "queued",
    )
    [job] = await harness.store.all_jobs()
    assert (job["subject"], job["status"]) == ("codertocat/hello-world#2", "queued")
    assert decompress_payload(job["payload"]) == body
    assert harness.wakeups == 1


async def test_a_redelivery_is_answered_200_and_enqueues_nothing(harness: Harness) -> None:
    body = example("pull_request", "opened.payload.json")
    assert (await harness.post(body, headers(body, delivery="same")))[0] == 202
    assert await harness.post(body, headers(body, delivery="same")) == (200, {"status": "duplicate"})
    assert len(await harness.store.all_jobs()) == 1
    assert harness.wakeups == 1


async def test_a_captured_body_replayed_under_a_new_delivery_id_is_a_duplicate(harness: Harness) -> None:
    """The signature covers the body only: whoever captured a signed delivery (a smee channel is
    enough) could send it again under a fresh ``X-GitHub-Delivery``. Its digest is recorded with
    the first, so the replay is answered as a duplicate and never worked, alone or in a batch."""
    body = example("pull_request", "opened.payload.json")
    assert (await harness.post(body, headers(body, delivery="original")))[0] == 202
    assert await harness.post(body, headers(body, delivery="replayed")) == (200, {"status": "duplicate"})
    other = example("pull_request", "review_requested.payload.json")
    answers = await asyncio.gather(
        *(harness.post(other, headers(other, delivery=f"burst-{n}")) for n in range(5))
    )
    assert sorted(status for status, _ in answers) == [200, 200, 200, 200, 202]
    assert await harness.store.delivery("replayed") is None
    recorded = {j["delivery_id"] for j in await harness.store.all_jobs()}
    assert (
        len(recorded) == 2
        and "original" in recorded
        and recorded - {"original"} < {f"burst-{n}" for n in range(5)}
    )
    assert harness.wakeups == 2


async def test_an_event_the_bot_does_not_handle_is_still_recorded(harness: Harness) -> None:
    body = example("workflow_run", sorted(p.name for p in (EXAMPLES / "workflow_run").iterdir())[0])
    assert (await harness.post(body, headers(body, event="workflow_run", delivery="wf")))[0] == 202
    assert await harness.store.delivery("wf") is not None


async def test_ping_is_answered_200_and_not_recorded(harness: Harness) -> None:
    body = example("ping", "payload.json")
    status, answer = await harness.post(body, headers(body, event="ping", delivery="p"))
    assert (status, answer) == (200, {"status": "pong"})
    assert await harness.store.delivery("p") is None


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "mangle"),
    [
        ("missing signature", lambda h: {k: v for k, v in h.items() if k != "X-Hub-Signature-256"}),
        ("wrong secret", lambda h: {**h, "X-Hub-Signature-256": "sha256=" + "0" * 64}),
        ("sha1 only", lambda h: {**h, "X-Hub-Signature-256": "sha1=" + "0" * 40}),
        ("garbage", lambda h: {**h, "X-Hub-Signature-256": "not a signature"}),
    ],
)
async def test_a_bad_signature_is_401_and_nothing_is_recorded(
    harness: Harness, case: str, mangle: Callable[[dict[str, str]], dict[str, str]]
) -> None:
    body = example("pull_request", "opened.payload.json")
    status, answer = await harness.post(body, mangle(headers(body, delivery=f"bad-{case}")))
    assert (status, answer) == (401, {"error": "bad signature"})
    assert await harness.store.all_jobs() == []


async def test_a_body_signed_with_another_secret_is_401(harness: Harness) -> None:
    body = b'{"action": "opened"}'
    hdrs = {**headers(body), "X-Hub-Signature-256": sign(body, b"other secret")}
    assert (await harness.post(body, hdrs))[0] == 401


async def test_an_oversized_body_is_413_from_its_declared_length(harness: Harness) -> None:
    body = b"{" + b" " * (64 * 1024) + b"}"
    status, answer = await harness.post(body, headers(body))
    assert (status, answer) == (413, {"error": "payload too large"})
    assert await harness.store.all_jobs() == []


async def test_an_oversized_chunked_body_is_413_while_streaming(harness: Harness) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield b" " * 8192

    async with harness.client.post(PATH, data=chunks(), headers=headers(b"")) as response:
        assert response.headers.get("Content-Length") != str(20 * 8192)
        assert response.status == 413
    assert await harness.store.all_jobs() == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "hdrs", "error"),
    [
        (b"{not json", {}, "body is not JSON"),
        (b"\xff\xfe", {}, "body is not JSON"),
        (b"[1, 2]", {}, "body is not a JSON object"),
        (b"{}", {"X-GitHub-Event": ""}, "missing X-GitHub-Event or X-GitHub-Delivery"),
        (b"{}", {"X-GitHub-Delivery": ""}, "missing X-GitHub-Event or X-GitHub-Delivery"),
        (
            b"{}",
            {"X-GitHub-Delivery": "x" * 300},
            "X-GitHub-Delivery: expected 1-255 printable ASCII characters",
        ),
    ],
)
async def test_a_malformed_delivery_is_400_and_logged(
    harness: Harness, body: bytes, hdrs: dict[str, str], error: str, caplog: pytest.LogCaptureFixture
) -> None:
    sent = {k: v for k, v in {**headers(body), **hdrs}.items() if v}
    status, answer = await harness.post(body, sent)
    assert (status, answer) == (400, {"error": error})
    assert any("delivery refused" in r.getMessage() for r in caplog.records)
    assert await harness.store.all_jobs() == []


HEALTH_TOKEN = "health details token"
DETAILS = {"Authorization": f"Bearer {HEALTH_TOKEN}"}


async def test_healthz_answers_200_when_the_database_answers(harness: Harness) -> None:
    async with harness.client.get("/healthz") as response:
        assert response.status == 200
        assert await response.json() == {"status": "ok"}  # no token configured: never details


async def test_healthz_and_deliveries_answer_503_when_the_database_is_down(
    aiohttp_client: ClientFactory,
) -> None:
    down = Store("postgresql+asyncpg://revbot:revbot@127.0.0.1:1/nothing")
    app = create_app(
        config=WebhookConfig(secret=SECRET, path=PATH),
        store=down,
        ledger=Ledger(down),
        details_token=HEALTH_TOKEN,
    )
    client = await aiohttp_client(app)
    async with client.get("/healthz") as response:
        assert response.status == 503
        # public: the verdict and why, no upstream text
        assert await response.json() == {"status": "unavailable", "reasons": ["database cannot take a write"]}
    async with client.get("/healthz", headers=DETAILS) as response:
        assert response.status == 503
        answer = await response.json()
        assert answer["status"] == "unavailable"
        assert answer["database"].startswith("ConnectionRefusedError")
        assert answer["reasons"] == ["database cannot take a write"]
    body = json.dumps({"action": "opened"}).encode()
    async with client.post(PATH, data=body, headers=headers(body)) as response:
        assert response.status == 503
    await down.close()


def test_signature_check_accepts_only_the_exact_sha256_hmac() -> None:
    body = b'{"a": 1}'
    good = sign(body)
    assert signature_matches(body, good, SECRET)
    assert signature_matches(body, good.upper().replace("SHA256=", "sha256="), SECRET)
    assert not signature_matches(body + b" ", good, SECRET)
    assert not signature_matches(body, None, SECRET)
    assert not signature_matches(body, good.removeprefix("sha256="), SECRET)


# ------------------------------------------------------------------------------- validation
BIG = 2**63


def opened(**changes: Any) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(example("pull_request", "opened.payload.json"))
    for dotted, value in changes.items():
        target = payload
        *parents, leaf = dotted.split("__")
        for key in parents:
            target = target[key]
        target[leaf] = value
    return payload


@pytest.mark.parametrize(
    ("event", "delivery", "error"),
    [
        ("pull_request", "72d3162e-cc78-11e3-81ab-4c9367dc0958", None),
        ("  pull_request ", " d-1 ", None),
        ("", "d", "missing X-GitHub-Event or X-GitHub-Delivery"),
        (None, "d", "missing X-GitHub-Event or X-GitHub-Delivery"),
        ("pull_request", None, "missing X-GitHub-Event or X-GitHub-Delivery"),
        ("pull_request", "d" * 255, None),
        ("pull_request", "d" * 256, "X-GitHub-Delivery: expected 1-255 printable ASCII characters"),
        ("pull_request", "d-\udcff\udcfe", "X-GitHub-Delivery: expected 1-255 printable ASCII characters"),
        ("pull_request", "d-\x00", "X-GitHub-Delivery: expected 1-255 printable ASCII characters"),
        ("e" * 100, "d", None),
        ("e" * 101, "d", "X-GitHub-Event: expected 1-100 letters, digits, '_', '.' or '-'"),
        ("pull_request\udcff", "d", "X-GitHub-Event: expected 1-100 letters, digits, '_', '.' or '-'"),
        ("pull request", "d", "X-GitHub-Event: expected 1-100 letters, digits, '_', '.' or '-'"),
        ("revbot_timer", "d", "X-GitHub-Event: revbot_timer is the bot's own"),
        ("revbot_readiness", "d", "X-GitHub-Event: revbot_readiness is the bot's own"),
    ],
)
def test_delivery_headers(event: str | None, delivery: str | None, error: str | None) -> None:
    if error is None:
        assert delivery_headers(event, delivery) == ((event or "").strip(), (delivery or "").strip())
    else:
        with pytest.raises(Refused) as refused:
            delivery_headers(event, delivery)
        assert (refused.value.status, refused.value.error) == (400, error)


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        (opened(), None),
        (opened(installation={"id": BIG - 1}), None),
        (opened(installation={"id": BIG}), f"installation.id: expected an integer from 1 to {BIG - 1}"),
        (opened(installation={"id": 0}), f"installation.id: expected an integer from 1 to {BIG - 1}"),
        (opened(installation={"id": True}), f"installation.id: expected an integer from 1 to {BIG - 1}"),
        (opened(installation={"id": "77"}), f"installation.id: expected an integer from 1 to {BIG - 1}"),
        (opened(installation={"id": None}), None),
        (opened(action="a" * 100), None),
        (opened(action="a" * 101), "action: longer than 100 characters"),
        (opened(action="open\x00ed"), "action: contains a NUL character"),
        (opened(action=7), None),  # not a string: not recorded as an action
        (opened(repository__full_name="o/" + "r" * 298), None),
        (opened(repository__full_name="o/" + "r" * 299), "repository.full_name: longer than 300 characters"),
        (opened(repository__full_name="o/r\x00"), "repository.full_name: contains a NUL character"),
        # Lower-casing lengthens some letters ("İ" becomes two characters): checked after it.
        (
            opened(repository__full_name="o/" + "İ" * 298),
            "repository.full_name: longer than 300 characters",
        ),
    ],
)
def test_every_ledger_value_is_checked_against_its_column(payload: dict[str, Any], error: str | None) -> None:
    body = json.dumps(payload).encode()
    if error is None:
        delivery = incoming_delivery("pull_request", "d", payload, body)
        assert delivery.installation_id == (payload.get("installation") or {}).get("id")
        assert delivery.repo == payload["repository"]["full_name"].lower()
        assert delivery.action == (payload["action"] if isinstance(payload["action"], str) else None)
        assert delivery.subject == f"{delivery.repo}#{payload['pull_request']['number']}"
        assert delivery.payload == body
    else:
        with pytest.raises(Refused) as refused:
            incoming_delivery("pull_request", "d", payload, body)
        assert (refused.value.status, refused.value.error) == (400, error)


async def raw_exchange(client: TestClient[Any, Any], request: bytes) -> bytes:
    """Send bytes no HTTP client library would send; return the server's answer (head and body)."""
    assert client.server.host is not None and client.server.port is not None
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    try:
        writer.write(request)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        return head + await asyncio.wait_for(reader.readexactly(length), 30)
    finally:
        writer.close()


def raw_post(body: bytes, *, event: bytes = b"pull_request", delivery: bytes = b"d-raw") -> bytes:
    head = (
        b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        b"Content-Type: application/json\r\nX-GitHub-Event: " + event + b"\r\n"
        b"X-GitHub-Delivery: " + delivery + b"\r\nX-Hub-Signature-256: " + sign(body).encode() + b"\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    return head + body


POISONS: list[tuple[str, Callable[[int], tuple[bytes, dict[str, str]] | bytes], str]] = [
    (
        "installation id over BIGINT",
        lambda n: (
            body := json.dumps(opened(installation={"id": BIG})).encode(),
            headers(body, delivery=f"p{n}"),
        ),
        "installation.id",
    ),
    (
        "action over its column",
        lambda n: (body := json.dumps(opened(action="x" * 101)).encode(), headers(body, delivery=f"p{n}")),
        "action: longer",
    ),
    (
        "event over its column",
        lambda n: (
            body := example("pull_request", "opened.payload.json"),
            headers(body, event="e" * 101, delivery=f"p{n}"),
        ),
        "X-GitHub-Event",
    ),
    (
        "NUL in action",
        lambda n: (body := json.dumps(opened(action="op\x00")).encode(), headers(body, delivery=f"p{n}")),
        "action: contains a NUL",
    ),
    (
        "NUL in full_name",
        lambda n: (
            body := json.dumps(opened(repository__full_name="a/\x00")).encode(),
            headers(body, delivery=f"p{n}"),
        ),
        "repository.full_name: contains a NUL",
    ),
    (
        "full_name over 300",
        lambda n: (
            body := json.dumps(opened(repository__full_name="a/" + "b" * 300)).encode(),
            headers(body, delivery=f"p{n}"),
        ),
        "repository.full_name: longer",
    ),
    (
        "non-UTF-8 delivery id",
        lambda n: raw_post(
            example("pull_request", "opened.payload.json"), delivery=b"p-\xff\xfe" + str(n).encode()
        ),
        "X-GitHub-Delivery",
    ),
    (
        "non-UTF-8 event",
        lambda n: raw_post(example("pull_request", "opened.payload.json"), event=b"pull_request\xc3\x28"),
        "X-GitHub-Event",
    ),
]


@pytest.mark.slow
async def test_a_poisoned_delivery_is_refused_alone_while_its_batch_commits(harness: Harness) -> None:
    """Each bad delivery arrives among 200 concurrent good ones: it gets 400 naming the bad value,
    every good one gets 202 (one bad row used to fail the whole group commit with 503)."""
    good = example("pull_request", "opened.payload.json")

    async def send_good(n: int) -> int:
        body = copy_of(good, n)
        return (await harness.post(body, headers(body, delivery=f"good-{n}")))[0]

    async def send_poison(n: int) -> tuple[int, str]:
        made = POISONS[n % len(POISONS)][1](n)
        if isinstance(made, bytes):
            answer = await raw_exchange(harness.client, made)
            head, _, payload = answer.partition(b"\r\n\r\n")
            return int(head.split()[1]), json.loads(payload)["error"]
        status, refused = await harness.post(*made)
        return status, refused["error"]

    goods, poisons = await asyncio.gather(
        asyncio.gather(*(send_good(n) for n in range(200))),
        asyncio.gather(*(send_poison(n) for n in range(2 * len(POISONS)))),
    )
    assert goods == [202] * 200
    for n, (status, error) in enumerate(poisons):
        name, _, expected = POISONS[n % len(POISONS)]
        assert status == 400, name
        assert expected in error, (name, error)
    rows = await harness.store.all_jobs()
    assert sorted(r["delivery_id"] for r in rows) == sorted(f"good-{n}" for n in range(200))


# ------------------------------------------------------------------------------- memory and time bounds
async def test_the_body_budget_serves_in_order_and_gives_up_after_its_wait() -> None:
    budget = BodyBudget(100)
    assert await budget.reserve(60, wait=0)
    assert not await budget.reserve(101, wait=10)  # could never fit: refused at once
    assert not await budget.reserve(50, wait=0)
    big = asyncio.create_task(budget.reserve(80, wait=30))
    small = asyncio.create_task(budget.reserve(10, wait=30))
    await asyncio.sleep(0)
    assert not big.done() and not small.done()  # first come, first served: small waits behind big
    budget.release(60)
    assert await big and await small
    assert (budget.in_use, budget.peak) == (90, 90)
    late = asyncio.create_task(budget.reserve(20, wait=30))
    await asyncio.sleep(0)
    late.cancel()
    with pytest.raises(asyncio.CancelledError):
        await late
    budget.release(90)
    assert budget.in_use == 0
    assert await budget.reserve(100, wait=0)


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[Store]:
    """For tests of the HTTP side alone (the database kind does not matter to them)."""
    s = Store(f"sqlite+aiosqlite:///{tmp_path / 'web.sqlite3'}")
    await s.create_schema()
    yield s
    await s.close()


async def bounded_client(aiohttp_client: ClientFactory, store: Store, **limits: Any) -> TestClient[Any, Any]:
    config = WebhookConfig(secret=SECRET, path=PATH, max_body_bytes=64 * 1024, **limits)
    return await aiohttp_client(create_app(config=config, store=store, ledger=Ledger(store)))


async def open_post(client: TestClient[Any, Any], body: bytes, *, send: int) -> asyncio.StreamWriter:
    """A signed POST whose headers promise ``body`` but of which only ``send`` bytes arrive."""
    assert client.server.host is not None and client.server.port is not None
    _, writer = await asyncio.open_connection(client.server.host, client.server.port)
    writer.write(raw_post(body)[: -len(body) + send] if send < len(body) else raw_post(body))
    await writer.drain()
    return writer


async def test_bodies_beyond_the_budget_wait_then_get_503_with_retry_after(
    sqlite_store: Store, aiohttp_client: ClientFactory
) -> None:
    client = await bounded_client(
        aiohttp_client, sqlite_store, body_budget_bytes=40 * 1024, body_budget_wait=0.2
    )
    body = b'{"action": "opened", "pad": "' + b" " * (30 * 1024) + b'"}'
    budget = client.app[BODY_BUDGET]
    promise = await open_post(client, body, send=0)  # promises 30 KiB, sends none: holds nothing
    holder = await open_post(client, body, send=len(body) - 10)  # sends most of it, then stalls
    deadline = time.monotonic() + 30
    while budget.in_use < len(body) - 10:
        assert time.monotonic() < deadline, "the stalled body never arrived"
        await asyncio.sleep(0.01)
    assert budget.in_use == len(body) - 10
    async with client.post(PATH, data=body, headers=headers(body, delivery="second")) as response:
        assert response.status == 503
        assert response.headers["Retry-After"] == "1"
        assert await response.json() == {"error": "busy: too many request bodies in flight"}
    holder.close()
    promise.close()
    small = json.dumps({"action": "opened"}).encode()
    async with client.post(PATH, data=small, headers=headers(small, delivery="small")) as response:
        assert response.status == 202
    assert budget.peak <= budget.limit


async def test_an_unsigned_body_is_refused_before_it_is_read(
    sqlite_store: Store, aiohttp_client: ClientFactory
) -> None:
    client = await bounded_client(aiohttp_client, sqlite_store)
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: push\r\nX-GitHub-Delivery: u\r\n"
        "Content-Length: 60000\r\n\r\n"
    ).encode()
    answer = await raw_exchange(client, head)  # the body is never sent: the answer cannot wait for it
    assert answer.startswith(b"HTTP/1.1 401")
    assert client.app[BODY_BUDGET].peak == 0


@pytest.mark.slow
async def test_a_stalled_body_is_cut_off_with_408(sqlite_store: Store, aiohttp_client: ClientFactory) -> None:
    client = await bounded_client(aiohttp_client, sqlite_store, body_timeout=0.3)
    body = json.dumps({"action": "opened", "pad": "x" * 1000}).encode()
    answer = await raw_exchange(client, raw_post(body)[:-500])
    assert answer.startswith(b"HTTP/1.1 408")
    assert b"request body not received within 0.3s" in answer
    assert await sqlite_store.all_jobs() == []


# ------------------------------------------------------------------------------- health
STATUS = WorkerStatus(running=True, identity_known=True, since_claim_loop=1.0, database_error=None)


@pytest.mark.parametrize(
    ("database_error", "worker", "queue", "problems"),
    [
        (None, STATUS, QueueStats(0, None), []),
        (None, None, QueueStats(3, 10.0), []),
        (
            "OperationalError: disk full",
            STATUS,
            None,
            ["database cannot take a write"],
        ),
        (None, replace(STATUS, running=False), QueueStats(0, None), ["worker is not running"]),
        (
            None,
            replace(STATUS, since_claim_loop=61.0),
            QueueStats(0, None),
            ["worker has not completed a claim round for over 60s (last: 61s ago)"],
        ),
        (
            None,
            replace(STATUS, since_claim_loop=None),
            QueueStats(0, None),
            ["worker has not completed a claim round for over 60s (last: never)"],
        ),
        # Still learning who it is from GitHub: not stalled; a queue that waits shows the effect.
        (None, replace(STATUS, identity_known=False, since_claim_loop=None), QueueStats(1, 5.0), []),
        (None, STATUS, QueueStats(1, 600.0), []),
        (None, STATUS, QueueStats(1, 601.0), ["oldest due job has waited 601s (bound 600s)"]),
        (
            "TimeoutError: no answer within 5s",
            replace(STATUS, since_claim_loop=100.0),
            None,
            [
                "database cannot take a write",
                "worker has not completed a claim round for over 60s (last: 100s ago)",
            ],
        ),
    ],
)
def test_health_problems(
    database_error: str | None, worker: WorkerStatus | None, queue: QueueStats | None, problems: list[str]
) -> None:
    assert (
        health_problems(database_error=database_error, worker=worker, queue=queue, config=HealthConfig())
        == problems
    )


async def test_healthz_reports_queue_depth_and_goes_503_when_a_due_job_waits_too_long(
    store: Store, clock: FakeClock, aiohttp_client: ClientFactory
) -> None:
    async def client_waiting_at_most(seconds: float) -> TestClient[Any, Any]:
        config = WebhookConfig(secret=SECRET, path=PATH)
        health = HealthConfig(queue_delay_seconds=seconds)
        return await aiohttp_client(
            create_app(
                config=config, store=store, ledger=Ledger(store), health=health, details_token=HEALTH_TOKEN
            )
        )

    client = await client_waiting_at_most(3600)
    body = example("pull_request", "opened.payload.json")
    for n in range(3):
        copy = copy_of(body, n)
        async with client.post(PATH, data=copy, headers=headers(copy, delivery=f"q{n}")) as response:
            assert response.status == 202
    async with client.get("/healthz", headers=DETAILS) as response:
        answer = await response.json()
        assert (response.status, answer["status"], answer["queue"]["depth"]) == (200, "ok", 3)
        assert 0 <= answer["queue"]["oldest_due_age"] < 3600
    stats = await store.queue_stats(now=clock.now + 7200)
    assert stats.depth == 3 and stats.oldest_due_age is not None and stats.oldest_due_age >= 7200
    assert await store.queue_stats(now=0.0) == QueueStats(depth=3, oldest_due_age=None)  # nothing due yet
    clock.advance(1.0)  # the store's clock: the oldest due job has now waited a second
    late = await client_waiting_at_most(0.5)
    async with late.get("/healthz") as response:
        answer = await response.json()
        assert response.status == 503
        assert answer["reasons"][0].startswith("oldest due job has waited")


# ------------------------------------------------------------------------------- envelope
def _odd(**fields: Any) -> bytes:
    return json.dumps({"action": "opened", **fields}).encode()


ODD_SHAPES = [
    _odd(repository="octo/app", installation=[77], pull_request=7),
    _odd(repository={"full_name": 7}, installation={"id": "77"}, number=True),
    _odd(repository={"full_name": "Octo/App"}, pull_request={"number": None}, number=12),
    _odd(repository={"full_name": "Octo/App"}, pull_request=None, issue={"number": 3}),
    _odd(repository=None, installation={"id": 2**70}),
    _odd(repository={"full_name": "o/r"}, check_run={"pull_requests": [{"number": 4}]}),
    _odd(repository={"full_name": "o/r"}, check_suite={"pull_requests": [{"number": 4}, {"number": 5}]}),
    _odd(repository={"full_name": "o/r"}, check_run={"pull_requests": "none"}, hook_id=1),
    _odd(action=None, repository={"full_name": "o/r", "name": "r"}, pull_request={"number": 1.5}),
    b'{"action": "opened", "repository": {"full_name": "o/r"}, "repository": {"full_name": "x/y"}}',
]


def _ledger_view(event: str, payload: dict[str, Any], body: bytes) -> Any:
    try:
        return incoming_delivery(event, "d", payload, body)
    except Refused as refused:
        return (refused.status, refused.error)


@pytest.mark.parametrize(
    ("event", "body"),
    [(path.parent.name, path.read_bytes()) for path in sorted(EXAMPLES.glob("*/*.json"))]
    + [
        (event, body)
        for body in ODD_SHAPES
        for event in ("pull_request", "issue_comment", "check_run", "check_suite")
    ],
)
def test_the_envelope_gives_the_ledger_what_a_full_parse_would(event: str, body: bytes) -> None:
    """The endpoint decodes only the fields the ledger reads: every GitHub example, and shapes no
    GitHub payload has, get the same row (or the same 400) as from a full parse."""
    assert _ledger_view(event, envelope(body), body) == _ledger_view(event, json.loads(body), body)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b'{"action": "opened", "pad": [1, 2,]}', "body is not JSON"),  # malformed where nothing is read
        (b'{"action": "opened"} trailing', "body is not JSON"),
        (b'"a string"', "body is not a JSON object"),
        (b"null", "body is not a JSON object"),
    ],
)
def test_the_envelope_still_checks_the_whole_document(body: bytes, error: str) -> None:
    with pytest.raises(Refused) as refused:
        envelope(body)
    assert (refused.value.status, refused.value.error) == (400, error)


async def test_jobs_wait_while_the_endpoint_receives_a_delivery(
    sqlite_store: Store, aiohttp_client: ClientFactory
) -> None:
    """From its start until its delivery is handed to the ledger, a request holds jobs back."""
    first = AckFirst(quiet=0.0)
    config = WebhookConfig(secret=SECRET, path=PATH, max_body_bytes=64 * 1024)
    client = await aiohttp_client(
        create_app(config=config, store=sqlite_store, ledger=Ledger(sqlite_store), ack_first=first)
    )
    body = json.dumps(opened()).encode()
    assert client.server.host is not None and client.server.port is not None
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    request = raw_post(body)
    writer.write(request[: -len(body) + 10])
    await writer.drain()
    await until(lambda: first.receiving == 1, "the handler reading the body")
    job = asyncio.create_task(first.wait(at_most=60))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not job.done()
    writer.write(body[10:])
    await writer.drain()
    await asyncio.wait_for(job, 30)
    assert (await asyncio.wait_for(reader.readline(), 30)).startswith(b"HTTP/1.1 202")
    writer.close()
    assert len(await sqlite_store.all_jobs()) == 1
    assert first.receiving == 0
