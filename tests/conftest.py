"""Shared fixtures: an RSA key, databases (SQLite always, PostgreSQL when configured), stores."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import Connection, MetaData, make_url, text
from sqlalchemy.ext.asyncio import create_async_engine

from app.settings.dburl import async_database_url
from app.store import Store
from tests.rule_catalogue import checked_analysers

PG_ENV = "DATABASE_URL_TEST_PG"

# The eval corpus (tests/fixtures/review_cases) holds code under review, not tests of revbot.
collect_ignore_glob = ["fixtures/*"]


@pytest.fixture(autouse=True)
def catalogued_rules(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every finding a built-in analyzer reports in a test names a rule of the catalogue."""
    yield from checked_analysers(monkeypatch)


@pytest.fixture(scope="session")
def private_key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist each worker gets a PostgreSQL database of its own (``revbot_test_gw0``
    beside ``revbot_test``, created once), since the fixtures drop every table around a test.
    Set in the environment, so the bot processes a test starts use it too."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    url = os.environ.get(PG_ENV)
    if worker and url:
        os.environ[PG_ENV] = asyncio.run(_worker_database(async_database_url(url), worker))


async def _worker_database(url: str, worker: str) -> str:
    base = make_url(url)
    mine = base.set(database=f"{base.database}_{worker}")
    engine = create_async_engine(base, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            found = await conn.execute(
                text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": mine.database}
            )
            if found.scalar() is None:
                await conn.execute(text(f'CREATE DATABASE "{mine.database}"'))
    finally:
        await engine.dispose()
    return mine.render_as_string(hide_password=False)


def _pg_url() -> str | None:
    url = os.environ.get(PG_ENV)
    if url:
        return async_database_url(url)
    if os.environ.get("CI"):
        pytest.fail(f"{PG_ENV} must be set in CI: the PostgreSQL tests are never skipped there")
    return None


async def _reset_pg(url: str) -> None:
    """Drop every table (including ones an older schema version had)."""
    engine = create_async_engine(url)
    async with engine.begin() as conn:

        def drop_all(sync: Connection) -> None:
            existing = MetaData()
            existing.reflect(sync)
            existing.drop_all(sync)

        await conn.run_sync(drop_all)
    await engine.dispose()


class FakeClock:
    """Epoch seconds that move only when a test says so (leases and due times without sleeping)."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@contextlib.asynccontextmanager
async def _fresh_pg() -> AsyncIterator[str]:
    url = _pg_url()
    if url is None:
        pytest.skip(f"{PG_ENV} is not set")
    await _reset_pg(url)
    try:
        yield url
    finally:
        await _reset_pg(url)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
async def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh, empty database of each kind."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'revbot.sqlite3'}"
        return
    async with _fresh_pg() as url:
        yield url


PG_FIXTURES = {"pg_url", "private_pg"}  # db_url's and outage's postgresql params carry the mark


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that need PostgreSQL carry the ``pg`` mark (``-m "not pg"``), found by fixture."""
    for item in items:
        if isinstance(item, pytest.Function) and PG_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.pg)


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    """A fresh, empty PostgreSQL database, for what only PostgreSQL can do."""
    async with _fresh_pg() as url:
        yield url


@pytest.fixture
async def store(db_url: str, clock: FakeClock) -> AsyncIterator[Store]:
    s = Store(db_url, clock=clock)
    await s.create_schema()
    yield s
    await s.close()


async def until(
    condition: Callable[[], bool | Awaitable[bool]], what: str, *, within: float = 90.0, every: float = 0.01
) -> None:
    """Wait for a state the test arranged, not for time to pass: ``within`` only bounds a hang
    (generous, so a loaded machine never trips it) and names what never happened."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        held = condition()
        if inspect.isawaitable(held):
            held = await held
        if held:
            return
        assert loop.time() < deadline, f"never happened: {what}"
        await asyncio.sleep(every)
