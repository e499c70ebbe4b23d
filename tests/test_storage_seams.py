"""The storage backend is chosen once: nothing outside ``app/store/connect.py`` and the backend
modules asks which database it runs on (issue 19). A new dialect is then one module there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[1] / "app"

# What asking "which database is this?" looks like in this code base.
DIALECT_QUESTIONS = re.compile(
    r"dialect\.name|\bis_sqlite\b|get_backend_name|\"sqlite\"|\"postgresql\"|"
    r"^\s*(import (sqlite3|asyncpg)|from (sqlite3|asyncpg) import)|sqlalchemy\.dialects",
    re.MULTILINE,
)
BACKENDS = {"store/connect.py", "store/sqlite.py", "store/sqlite_writer.py", "store/postgres.py"}
# Not questions about the running store, each for its reason:
ALLOWED = {
    # DATABASE_URL's accepted spellings, sslmode and the Heroku dyno check, as pure string work:
    # ``config`` checks a URL with it at load (a bad one exits 2 naming it) before any store
    # exists, so it cannot be a backend module (``app.store`` imports ``app.settings.config``)
    "settings/dburl.py": {"is_sqlite", "get_backend_name", '"sqlite"'},
    # the schema's declarative per-dialect column type (one table definition for both)
    "store/schema.py": {'"sqlite"'},
}


def questions(path: Path) -> list[str]:
    return [m.group(0).strip() for m in DIALECT_QUESTIONS.finditer(path.read_text())]


def test_no_module_outside_the_backends_branches_on_the_database() -> None:
    found = {}
    for path in sorted(APP.rglob("*.py")):
        name = path.relative_to(APP).as_posix()
        if name in BACKENDS:
            continue
        asked = set(questions(path)) - ALLOWED.get(name, set())
        if asked:
            found[name] = sorted(asked)
    assert found == {}


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ('if engine.dialect.name == "postgresql":', True),
        ("if self.store.is_sqlite:", True),
        ("make_url(url).get_backend_name()", True),
        ("import asyncpg", True),
        ("from sqlalchemy.dialects.sqlite import insert", True),
        ("self.store.backend.upsert(table)", False),
        ('"""the SQLite writer thread (sqlite_writer.py)"""', False),
    ],
)
def test_the_check_recognises_a_dialect_question(text: str, asks: bool, tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(text + "\n")
    assert bool(questions(source)) is asks
