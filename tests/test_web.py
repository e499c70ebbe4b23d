"""Every answer of the webhook endpoint's contract, over real HTTP, with real signatures."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from app.store import Ledger, Store, decompress_payload
from app.web import WebhookConfig, create_app, signature_matches

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


async def test_an_event_the_bot_does_not_handle_is_still_recorded(harness: Harness) -> None:
    body = example("workflow_run", sorted(p.name for p in (EXAMPLES / "workflow_run").iterdir())[0])
    assert (await harness.post(body, headers(body, event="workflow_run", delivery="wf")))[0] == 202
    assert await harness.store.delivery("wf") is not None


async def test_ping_is_answered_200_and_not_recorded(harness: Harness) -> None:
    body = example("ping", "payload.json")
    status, answer = await harness.post(body, headers(body, event="ping", delivery="p"))
    assert (status, answer) == (200, {"status": "pong"})
    assert await harness.store.delivery("p") is None


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


@pytest.mark.parametrize(
    ("body", "hdrs", "error"),
    [
        (b"{not json", {}, "body is not JSON"),
        (b"\xff\xfe", {}, "body is not JSON"),
        (b"[1, 2]", {}, "body is not a JSON object"),
        (b"{}", {"X-GitHub-Event": ""}, "missing X-GitHub-Event or X-GitHub-Delivery"),
        (b"{}", {"X-GitHub-Delivery": ""}, "missing X-GitHub-Event or X-GitHub-Delivery"),
        (b"{}", {"X-GitHub-Delivery": "x" * 300}, "missing X-GitHub-Event or X-GitHub-Delivery"),
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


async def test_healthz_answers_200_when_the_database_answers(harness: Harness) -> None:
    async with harness.client.get("/healthz") as response:
        assert response.status == 200
        assert (await response.json())["database"] == "ok"


async def test_healthz_and_deliveries_answer_503_when_the_database_is_down(
    aiohttp_client: ClientFactory,
) -> None:
    down = Store("postgresql+asyncpg://revbot:revbot@127.0.0.1:1/nothing")
    app = create_app(config=WebhookConfig(secret=SECRET, path=PATH), store=down, ledger=Ledger(down))
    client = await aiohttp_client(app)
    async with client.get("/healthz") as response:
        assert response.status == 503
        assert (await response.json())["database"] == "unreachable"
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
