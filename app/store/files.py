"""The SQLite database's files are private: they hold private repositories' payloads.

The directory the bot creates for them is 0700 and the database file 0600 (created so before
SQLite opens it, whatever the umask). SQLite gives its ``-wal``, ``-shm`` and ``-journal``
files the database file's mode, so they are private too; ones left by an earlier run are
narrowed as well. A directory that already existed is the operator's: it is not changed, only
reported when others can read it.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600
COMPANIONS = ("-wal", "-shm", "-journal")


def _make_private_directory(directory: Path) -> None:
    missing = []
    for parent in (directory, *directory.parents):
        if parent.exists():
            break
        missing.append(parent)
    for created in reversed(missing):
        created.mkdir(mode=DIRECTORY_MODE, exist_ok=True)
        created.chmod(DIRECTORY_MODE)  # mkdir's mode is narrowed by the umask, never widened
    if not missing and directory.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "the database directory %s is accessible to other users (mode %o); chmod 700 it",
            directory,
            stat.S_IMODE(directory.stat().st_mode),
        )


def prepare_private_database(database: str) -> None:
    """Create the SQLite file ``database`` (and its directory) private, or narrow it and its
    companions to 0600 when they exist."""
    path = Path(database)
    _make_private_directory(path.parent if str(path.parent) else Path("."))
    descriptor = os.open(path, os.O_CREAT | os.O_RDWR, FILE_MODE)
    os.close(descriptor)
    for suffix in ("", *COMPANIONS):
        companion = path.with_name(path.name + suffix)
        if companion.exists() and stat.S_IMODE(companion.stat().st_mode) != FILE_MODE:
            companion.chmod(FILE_MODE)
