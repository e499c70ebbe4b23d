"""The one place that chooses the storage backend: from the URL, once per ``Store``.

Each backend configures its own connections (pool sizes, TLS, SQLite pragmas): ``sqlite.py``
(one writer thread, group commit), ``postgres.py`` (asyncpg for the hot writes, SQLAlchemy's
pool for the rest). Nothing outside this module and those asks which database it is on.
"""

from __future__ import annotations

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from ..settings.config import DEFAULT_POOL_SIZE
from ..settings.dburl import is_sqlite
from . import postgres, sqlite
from .backend import Backend
from .postgres import PostgresBackend, describe
from .sqlite import SqliteBackend


def open_backend(
    url: str, *, sqlite_synchronous: str = "FULL", pool_size: int = DEFAULT_POOL_SIZE
) -> Backend:
    """The backend for a SQLAlchemy async URL (``dburl.async_database_url`` makes one)."""
    if is_sqlite(url):
        return SqliteBackend(url, sqlite_synchronous=sqlite_synchronous)
    return PostgresBackend(url, pool_size=pool_size)


def read_only_engine(url: str) -> AsyncEngine:
    """An engine that never creates or changes anything (``doctor``); FileNotFoundError names a
    SQLite file that does not exist yet."""
    if is_sqlite(url):
        return sqlite.read_only_engine(url)
    return postgres.read_only_engine(url)


def describe_database(url: str) -> str:
    """Where the database is, without its password (also before a backend could be opened)."""
    if is_sqlite(url):
        return f"SQLite {make_url(url).database}"
    return describe(url)
