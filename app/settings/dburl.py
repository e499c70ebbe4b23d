"""``DATABASE_URL`` as operators paste it, turned into what SQLAlchemy and asyncpg accept.

Pure string work, importing nothing of the app: ``config`` checks a URL with it at load (so that
a bad one exits 2 naming the setting), and ``store`` opens its engines with it. It is not inside
``app/store/`` because ``app.store`` imports ``app.settings.config``, which would then import it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

DEFAULT_DATABASE_PATH = Path("data") / "revbot.sqlite3"
DEFAULT_URL = f"sqlite+aiosqlite:///{DEFAULT_DATABASE_PATH}"
# What libpq's ``sslmode`` accepts; asyncpg's ``ssl`` argument takes the same words.
SSL_MODES = frozenset({"disable", "allow", "prefer", "require", "verify-ca", "verify-full"})


class BadDatabaseUrl(ValueError):
    """The URL cannot be used; the message says why (``config`` names the setting)."""


def async_database_url(url: str) -> str:
    """Map the URL forms operators paste (Heroku's ``postgres://``) to SQLAlchemy async drivers."""
    for prefix in ("postgres://", "postgresql://", "postgresql+asyncpg://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url.removeprefix(prefix)
    for prefix in ("sqlite:///", "sqlite+aiosqlite:///"):
        if url.startswith(prefix):
            return "sqlite+aiosqlite:///" + url.removeprefix(prefix)
    raise BadDatabaseUrl("expected a postgres://, postgresql:// or sqlite:/// URL")


def sqlalchemy_url(raw: str | None) -> str:
    """The SQLAlchemy async URL for ``DATABASE_URL`` (unset: the SQLite file under ``data/``)."""
    return async_database_url(raw) if raw else DEFAULT_URL


def check(url: str, *, pool_size: int) -> None:
    """Raise BadDatabaseUrl now for what would otherwise fail when the engine is first made."""
    if not is_sqlite(url):
        postgres_engine_options(url, pool_size=pool_size)


def erased_on_restart(url: str, environ: Mapping[str, str]) -> bool:
    """A SQLite file on a Heroku dyno (``DYNO`` is set): its filesystem is thrown away at every
    restart (at least daily)."""
    return bool(environ.get("DYNO")) and is_sqlite(url)


def is_sqlite(url: str) -> bool:
    """Whether an ``async_database_url`` names a SQLite file."""
    return make_url(url).get_backend_name() == "sqlite"


def postgres_engine_options(url: str, *, pool_size: int) -> tuple[str, dict[str, Any]]:
    """The URL and ``create_async_engine`` options for PostgreSQL.

    Heroku and Fly hand out URLs ending in ``?sslmode=require`` (libpq's spelling); SQLAlchemy
    would pass it to asyncpg as an unknown keyword (a TypeError), so it becomes asyncpg's ``ssl``.
    """
    parsed = make_url(url)
    query = dict(parsed.query)
    mode = query.pop("sslmode", None)
    if isinstance(mode, tuple):  # repeated in the query string: the last one counts, as in libpq
        mode = mode[-1]
    connect_args: dict[str, Any] = {}
    if mode is not None:
        if mode not in SSL_MODES:
            known = ", ".join(sorted(SSL_MODES))
            raise BadDatabaseUrl(f"sslmode={mode!r} is not one of {known}")
        connect_args["ssl"] = mode
    options: dict[str, Any] = {
        "pool_size": pool_size,
        "max_overflow": 0,
        "pool_pre_ping": True,
        "connect_args": connect_args,
    }
    return parsed.set(query=query).render_as_string(hide_password=False), options
