"""Missed deliveries come back from GitHub's delivery log, once; old payloads are emptied.

GitHub keeps a log of every delivery attempt and never retries a failed one by itself. The fake
keeps that log too (every webhook it sends, with the status it got), so these tests take the bot
down, let deliveries fail, and check what the sweep recovers, through the same ledger.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import update

from app.github.app import AppClient
from app.github.auth import AppJWT
from app.intake.recovery import (
    LOOKBACK_SECONDS,
    OVERLAP_SECONDS,
    DeliveryRecovery,
    logged_digest,
    never_delivered,
)
from app.metrics import REGISTRY
from app.ops.housekeeping import (
    ANSWER_DAYS,
    EMPTY_PAYLOAD,
    Housekeeping,
    empty_old_payloads,
    forget_old_answers,
)
from app.store import IncomingDelivery, JobStatus, Store, decompress_payload, deliveries
from app.store.llm_memory import DatabaseMemory
from app.store.postgres import PostgresBackend
from app.store.schema import llm_answers
from tests.harness import APP_ID, REPO, SECRET, BotHarness

AUTHOR = "alice"
DECOY = "revbot"


def distinct(payload: dict[str, Any], n: int) -> dict[str, Any]:
    """Another delivery of the same kind: GitHub's bodies differ (a timestamp at least), and a
    body seen before under another id is a replay, answered as a duplicate."""
    copy: dict[str, Any] = json.loads(json.dumps(payload))
    copy["pull_request"]["updated_at"] = f"2027-01-01T00:{n // 60:02d}:{n % 60:02d}Z"
    return copy


def review_posts(bot: BotHarness) -> list[object]:
    return [
        c for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/reviews") and c.status == 200
    ]


def log_reads(bot: BotHarness) -> list[str]:
    return [c.path for c in bot.fake.calls if c.path.startswith("/app/hook/deliveries")]


@pytest.fixture
async def down(tmp_path: Path) -> AsyncIterator[BotHarness]:
    """The fake GitHub is up and sends webhooks to the bot's URL, where nothing listens yet."""
    bot = BotHarness(tmp_path, start_fake=False)
    bot.fake.add_user(DECOY)
    bot.fake.webhook_url = bot.webhook_url
    await bot.fake.start(port=bot.fake_port)
    yield bot
    await bot.stop()
    bot.assert_conforms()


async def recovery_for(
    bot: BotHarness, session: aiohttp.ClientSession, **options: object
) -> DeliveryRecovery:
    app = AppClient(session, app_jwt=AppJWT(APP_ID, bot.fake.private_key_pem), api_url=bot.fake.base_url)
    return DeliveryRecovery(bot.store, app, **options)  # type: ignore[arg-type]


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_review_request_sent_while_the_bot_was_down_is_recovered_at_startup(down: BotHarness) -> None:
    bot = down
    number = bot.open_pull({"src/c.py": "value = undefined_name\n"}, author=AUTHOR)
    assert await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR) == 0  # nobody answered
    [failed] = bot.fake.hooks.deliveries
    assert (failed.status_code, failed.status) == (502, "failed to connect")
    recovered_before = REGISTRY.get_sample_value("revbot_recovered_deliveries_total") or 0.0

    await bot.start()
    assert bot.runtime is not None and bot.runtime.housekeeping is not None
    await bot.runtime.housekeeping.round_done.wait()
    await bot.drain()

    assert len(review_posts(bot)) == 1
    row = await bot.store.delivery(failed.guid)
    assert row is not None and row["event"] == "pull_request" and row["status"] == "done"
    assert decompress_payload(row["payload"]) != b""
    assert bot.runtime.housekeeping.last_sweep is not None
    assert bot.runtime.housekeeping.last_sweep.recovered == 1
    assert REGISTRY.get_sample_value("revbot_recovered_deliveries_total") == recovered_before + 1
    assert log_reads(bot) == ["/app/hook/deliveries", f"/app/hook/deliveries/{failed.id}"]

    # The next sweep finds nothing new: the delivery is in the ledger now.
    async with aiohttp.ClientSession() as session:
        counts = await (await recovery_for(bot, session)).sweep()
    assert counts is not None and counts.recovered == 0 and counts.already_recorded == 1
    await bot.drain()
    assert len(review_posts(bot)) == 1


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_recovered_body_replayed_under_a_new_delivery_id_is_a_duplicate(down: BotHarness) -> None:
    """The log keeps the attempt's signature: the recovered row carries the digest the endpoint
    would have recorded, so whoever captured the failed attempt cannot have it worked twice."""
    bot = down
    number = bot.open_pull({"src/c.py": "value = undefined_name\n"}, author=AUTHOR)
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    [failed] = bot.fake.hooks.deliveries
    body = json.dumps(failed.payload, separators=(",", ":")).encode()  # as the fake sent it
    signature = failed.request_headers["X-Hub-Signature-256"]
    assert signature == "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    await bot.start()
    assert bot.runtime is not None and bot.runtime.housekeeping is not None
    await bot.runtime.housekeeping.round_done.wait()
    await bot.drain()
    assert len(review_posts(bot)) == 1

    replay = {**failed.request_headers, "X-GitHub-Delivery": "captured-and-replayed"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(bot.webhook_url, data=body, headers=replay) as answer,
    ):
        assert (answer.status, await answer.json()) == (200, {"status": "duplicate"})
    await bot.drain()
    assert await bot.store.delivery("captured-and-replayed") is None
    assert len(review_posts(bot)) == 1


HEX = "ab" * 32


@pytest.mark.parametrize(
    ("headers", "digest"),
    [
        ({"X-Hub-Signature-256": f"sha256={HEX}"}, HEX),
        ({"x-hub-signature-256": f"sha256={HEX.upper()}"}, HEX),  # header names are case-free
        ({"X-Hub-Signature-256": "sha256=6dcb09b5b57875f334f61aebed695e2e4193db5e"}, None),  # cut short
        ({"X-Hub-Signature": "sha1=a84d88e7554fc1fa21bcbc4efae3c782a70d2b9d"}, None),  # SHA-1 only
        ({}, None),
        (None, None),
        ("X-Hub-Signature-256: sha256=" + HEX, None),
    ],
)
def test_the_logged_signature_is_the_digest_only_when_a_whole_sha256(
    headers: Any, digest: str | None
) -> None:
    assert logged_digest(headers) == digest


@pytest.mark.e2e
@pytest.mark.slow
async def test_only_deliveries_without_a_success_and_without_a_ledger_row_are_fetched(
    down: BotHarness,
) -> None:
    bot = down
    bot.run_worker = False
    payload = bot.fake.pull_request_payload(REPO, bot.open_pull({"a.py": "x = 1\n"}), "opened", sender=AUTHOR)
    await bot.fake.send_webhook("pull_request", payload, delivery_id="lost")
    await bot.start()
    assert bot.runtime is not None and bot.runtime.housekeeping is not None
    await bot.runtime.housekeeping.round_done.wait()
    assert await bot.fake.send_webhook("pull_request", distinct(payload, 1), delivery_id="arrived") == 202
    arrived = bot.fake.hooks.deliveries[-1]
    # GitHub gave up waiting (its 10 s) although the bot had recorded it: the log says failed.
    arrived.status_code, arrived.status = 504, "timed out"
    url = arrived.url

    def attempt(guid: str, status_code: int, error: str | None = None) -> None:
        bot.fake.hooks.add(
            guid=guid,
            event="pull_request",
            payload=payload,
            url=url,
            request_headers={},
            status_code=status_code,
            error=error,
            duration=0.1,
        )

    attempt("redelivered", 502, "failed to connect")
    attempt("redelivered", 202)  # someone pressed "Redeliver" and it went through
    assert never_delivered([d.item() for d in bot.fake.hooks.deliveries]).keys() == {"lost", "arrived"}

    async with aiohttp.ClientSession() as session:
        counts = await (await recovery_for(bot, session)).sweep()
    assert counts is not None
    assert (counts.failed, counts.already_recorded, counts.recovered) == (2, 2, 0)
    lost = next(d for d in bot.fake.hooks.deliveries if d.guid == "lost")
    # Only the lost one was ever fetched (at startup); nothing was recorded for "redelivered",
    # which GitHub says arrived.
    assert [p for p in log_reads(bot) if p != "/app/hook/deliveries"] == [f"/app/hook/deliveries/{lost.id}"]
    assert {r["delivery_id"] for r in await bot.store.all_jobs()} == {"lost", "arrived"}


@pytest.mark.e2e
@pytest.mark.slow
async def test_the_sweep_pages_through_the_log_and_stops_where_it_read_before(down: BotHarness) -> None:
    bot = down
    bot.run_worker = False
    payload = bot.fake.pull_request_payload(REPO, bot.open_pull({"a.py": "x = 1\n"}), "opened", sender=AUTHOR)
    for n in range(130):
        await bot.fake.send_webhook("pull_request", distinct(payload, n), delivery_id=f"missed-{n}")
    await bot.start()
    assert bot.runtime is not None and bot.runtime.housekeeping is not None
    await bot.runtime.housekeeping.round_done.wait()
    sweep = bot.runtime.housekeeping.last_sweep
    assert sweep is not None and (sweep.read, sweep.recovered) == (130, 130)
    pages = [c for c in bot.fake.calls if c.path == "/app/hook/deliveries"]
    assert len(pages) == 2 and pages[1].query["cursor"].startswith("v1_")

    newest = bot.fake.hooks.deliveries[-1].delivered_at
    async with aiohttp.ClientSession() as session:
        recovery = await recovery_for(bot, session)
        read_until = await recovery.read_until()
        assert (
            read_until is not None and abs(read_until - newest) <= 1.0
        )  # the log's stamps are whole seconds
        # A sweep reads back to where the last one read, minus the overlap, and no further.
        await recovery._save(newest + OVERLAP_SECONDS + 2)
        counts = await recovery.sweep()
        assert counts is not None and counts.read == 0
        # From the oldest attempt's stamp, however long sending the 130 took: all of them again.
        oldest = math.floor(bot.fake.hooks.deliveries[0].delivered_at)
        await recovery._save(oldest + OVERLAP_SECONDS)
        counts = await recovery.sweep()
        assert counts is not None and counts.read == 130 and counts.already_recorded == 130
        # Never further back than the 3 days GitHub keeps, however old the cursor.
        await recovery._save(newest - 10 * LOOKBACK_SECONDS)
        late = await recovery_for(bot, session, clock=lambda: newest + LOOKBACK_SECONDS + 60)
        counts = await late.sweep()
        assert counts is not None and counts.read == 0
    assert bot.fake.problems == []


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_failing_sweep_is_visible_and_the_next_round_retries(down: BotHarness) -> None:
    bot = down
    bot.run_worker = False
    payload = bot.fake.pull_request_payload(REPO, bot.open_pull({"a.py": "x = 1\n"}), "opened", sender=AUTHOR)
    await bot.fake.send_webhook("pull_request", payload, delivery_id="missed")
    bot.fake.fail_next("GET", r"/app/hook/deliveries", status=502, times=10)  # startup round fails
    await bot.start()
    assert bot.runtime is not None and bot.runtime.housekeeping is not None
    house = bot.runtime.housekeeping
    await house.round_done.wait()
    assert house.last_error is not None and "GitHubBroken" in house.last_error
    assert await bot.store.delivery("missed") is None
    errors = REGISTRY.get_sample_value("revbot_recovery_sweeps_total", {"outcome": "error"})
    assert errors is not None and errors >= 1
    bot.fake._server.faults.clear()
    await house.run_once()
    assert house.last_error is None and house.recovered_total == 1
    assert await bot.store.delivery("missed") is not None
    _, health = await bot.health()
    assert health["delivery_recovery"]["recovered"] == 1


async def test_one_process_sweeps_at_a_time(db_url: str) -> None:
    first, second = Store(db_url), Store(db_url)
    await first.create_schema()
    try:
        async with aiohttp.ClientSession() as session:
            # nothing listens there: the lock decides before GitHub would be asked
            dummy = AppClient(session, app_jwt=AppJWT(1, ""), api_url="http://127.0.0.1:9")
            one = DeliveryRecovery(first, dummy)
            other = DeliveryRecovery(second, dummy)
            async with one._elected() as elected:
                assert elected
                assert await one.sweep() is None  # the same process does not sweep twice at once
                if isinstance(first.backend, PostgresBackend):  # SQLite: one process per file
                    assert await other.sweep() is None  # another process waits its turn
            async with other._elected() as elected:
                assert elected
    finally:
        await first.close()
        await second.close()


# ------------------------------------------------------------------ retention
async def test_handled_payloads_are_emptied_after_the_retention_and_rows_stay(store: Store) -> None:
    def incoming(delivery_id: str, subject: str) -> IncomingDelivery:
        return IncomingDelivery(delivery_id, "pull_request", "opened", 1, "o/r", subject, b'{"big": 1}')

    assert await store.record_deliveries([incoming("old-done", "o/r#1"), incoming("old-queued", "o/r#2")])
    [job] = [
        j for j in await store.claim(worker_id="w", limit=5, lease_seconds=60) if j.delivery_id == "old-done"
    ]
    await store.finish(job, worker_id="w", status=JobStatus.DONE)
    await store.record_deliveries([incoming("new-done", "o/r#3")])
    [new] = [
        j for j in await store.claim(worker_id="w", limit=5, lease_seconds=60) if j.delivery_id == "new-done"
    ]
    await store.finish(new, worker_id="w", status=JobStatus.DONE)
    now = time.time()
    ended = {
        "old-done": now - 30 * 86400 - 1,
        "old-queued": now - 40 * 86400,
        "new-done": now - 30 * 86400 + 60,
    }
    async with store.begin() as conn:
        for delivery_id, at in ended.items():
            await conn.execute(
                update(deliveries).where(deliveries.c.delivery_id == delivery_id).values(updated_at=at)
            )
    before = REGISTRY.get_sample_value("revbot_payloads_emptied_total") or 0.0

    emptied = await empty_old_payloads(store, days=30, now=now)
    assert emptied == 1
    rows = {r["delivery_id"]: r for r in await store.all_jobs()}
    assert rows["old-done"]["payload"] == EMPTY_PAYLOAD and decompress_payload(EMPTY_PAYLOAD) == b""
    assert decompress_payload(rows["old-queued"]["payload"]) == b'{"big": 1}'  # not handled yet
    assert set(rows) == {"old-done", "old-queued", "new-done"}
    assert await store.record_deliveries([incoming("old-done", "o/r#1")]) == [False]  # still a duplicate
    assert await empty_old_payloads(store, days=30, now=now) == 0
    assert REGISTRY.get_sample_value("revbot_payloads_emptied_total") == before + 1


async def test_retention_runs_in_the_housekeeping_round(tmp_path: Path) -> None:
    store = Store(f"sqlite+aiosqlite:///{tmp_path / 'r.sqlite3'}")
    await store.create_schema()
    try:
        await store.record_deliveries([IncomingDelivery("d", "push", None, 1, "o/r", "o/r", b"{}")])
        [job] = await store.claim(worker_id="w", limit=1, lease_seconds=60)
        await store.finish(job, worker_id="w", status=JobStatus.DONE)

        class NoLog:
            async def sweep(self) -> None:
                return None

        house = Housekeeping(store, NoLog(), retention_days=1, clock=lambda: time.time() + 2 * 86400)  # type: ignore[arg-type]
        await house.run_once()
        assert (await store.delivery("d") or {})["payload"] == EMPTY_PAYLOAD
    finally:
        await store.close()


async def test_old_model_answers_are_forgotten_in_the_housekeeping_round(tmp_path: Path) -> None:
    """The model's answer cache (files, thread judgements) stays bounded: an answer last stored
    more than ``ANSWER_DAYS`` ago is deleted, a recent one kept."""
    store = Store(f"sqlite+aiosqlite:///{tmp_path / 'a.sqlite3'}")
    await store.create_schema()
    memory = DatabaseMemory(store.backend)
    try:
        await memory.remember("old", '{"status": "fixed"}')
        await memory.remember("new", '{"status": "not_fixed"}')
        now = time.time()
        async with store.begin() as conn:
            await conn.execute(
                update(llm_answers)
                .where(llm_answers.c.key == "old")
                .values(created_at=now - ANSWER_DAYS * 86400 - 1)
            )
        assert await forget_old_answers(store, now=now) == 1
        assert await memory.answer("old") is None and await memory.answer("new") is not None

        class NoLog:
            async def sweep(self) -> None:
                return None

        later = Housekeeping(store, NoLog(), retention_days=1, clock=lambda: now + (ANSWER_DAYS + 1) * 86400)  # type: ignore[arg-type]
        await later.run_once()
        assert await memory.answer("new") is None
    finally:
        await store.close()


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_delivery_gone_from_the_log_is_skipped_and_the_rest_recovered(down: BotHarness) -> None:
    bot = down
    bot.run_worker = False
    payload = bot.fake.pull_request_payload(REPO, bot.open_pull({"a.py": "x = 1\n"}), "opened", sender=AUTHOR)
    await bot.fake.send_webhook("pull_request", payload, delivery_id="expired")
    await bot.fake.send_webhook("pull_request", distinct(payload, 1), delivery_id="kept")
    expired = bot.fake.hooks.deliveries[0]
    bot.fake.fail_next("GET", rf"/app/hook/deliveries/{expired.id}", status=404)
    await bot.start()
    assert bot.runtime is not None and bot.runtime.housekeeping is not None
    await bot.runtime.housekeeping.round_done.wait()
    assert bot.runtime.housekeeping.last_error is None
    assert {r["delivery_id"] for r in await bot.store.all_jobs()} == {"kept"}
