"""The ruff versions repositories pin, installed once in ``REVIEW_RUFF_VERSIONS`` and reused.

This runs in the serving process, before the analysis: installing needs the package index, which
the analysis process never reaches. The version is the only thing taken from the pull request:
digits and dots (``lintconfig.RuffPin``), normalised (``0.4.1`` and ``0.4.1.0`` are one version,
one directory), so a pull request cannot make it name anything else. At most ``keep`` versions
are kept (the least recently used is removed, never one a review holds: ``lease``), an install
is bounded in time and in size, one install runs at a time in the process, and a version that
could not be installed is not tried again for a day.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

from ..core.lintconfig import RuffPin

__all__ = ["MIN_PINNED_RUFF", "RuffPins", "install_environment"]

log = logging.getLogger(__name__)

INSTALL_TIMEOUT = 180.0
MAX_INSTALL_BYTES = 200 * 1024 * 1024
MIN_PINNED_RUFF = (0, 1)  # older ruffs lack the command-line options used here
FAILURE_MEMORY = 24 * 3600.0  # seconds a version that could not be installed is not tried again
# The installer keeps the operator's package-index settings, never the bot's own secrets.
_SECRET_NAME = re.compile(r"SECRET|TOKEN|PASSWORD|PRIVATE|API_KEY|DATABASE_URL", re.IGNORECASE)


def install_environment(environ: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in environ.items() if k.startswith("PIP_") or not _SECRET_NAME.search(k)}


# One install at a time in the process (per event loop: an asyncio lock belongs to one).
_install_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)


def _install_slot() -> asyncio.Lock:
    return _install_slots.setdefault(asyncio.get_running_loop(), asyncio.Lock())


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


class RuffPins:
    def __init__(
        self,
        directory: Path,
        *,
        keep: int = 4,
        installer: Sequence[str] | None = None,
        time_limit: float = INSTALL_TIMEOUT,
        max_bytes: int = MAX_INSTALL_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = directory
        self.keep = keep
        self.installer = list(installer or [sys.executable, "-m", "pip", "install", "--quiet"])
        self.time_limit = time_limit
        self.max_bytes = max_bytes
        self.clock = clock
        self._locks: dict[str, asyncio.Lock] = {}
        self._leases: Counter[str] = Counter()  # version -> reviews holding it
        self._failed: dict[str, float] = {}  # version -> when its install failed (``clock``)
        self.installs_waiting = 0  # installs waiting for the one that runs

    @contextlib.asynccontextmanager
    async def lease(self, pin: RuffPin) -> AsyncIterator[list[str] | None]:
        """The command of ruff ``pin``, installed the first time, and kept installed until the
        block ends; None when it cannot be (too old for the options used here, or the install
        failed, now or within ``FAILURE_MEMORY``, or was too large or too slow)."""
        label = pin.label
        command = await self._hold(pin)
        try:
            yield command
        finally:
            if command is not None:
                self._leases[label] -= 1

    async def _hold(self, pin: RuffPin) -> list[str] | None:
        if pin.version < MIN_PINNED_RUFF:
            return None
        label = pin.label
        binary = self.directory / label / "bin" / "ruff"
        async with self._locks.setdefault(label, asyncio.Lock()):
            failed = self._failed.get(label)
            if failed is not None and self.clock() - failed < FAILURE_MEMORY:
                return None
            if not binary.is_file() and not await self._install_one(label):
                self._failed[label] = self.clock()
                return None
            self._failed.pop(label, None)
            self._leases[label] += 1  # before the clean-up below, which spares what is held
            await asyncio.to_thread(self._used, label)
            return [str(binary)]

    async def _install_one(self, label: str) -> bool:
        self.installs_waiting += 1
        async with _install_slot():
            self.installs_waiting -= 1
            log.info("installing ruff %s (%d more waiting)", label, self.installs_waiting)
            return await self._install(label)

    async def _install(self, label: str) -> bool:
        staging = await asyncio.to_thread(self._staging, label)
        command = [
            *self.installer,
            "--disable-pip-version-check",
            "--no-deps",
            "--only-binary=:all:",
            "--target",
            str(staging),
            f"ruff=={label}",
        ]
        try:
            process = await asyncio.create_subprocess_exec(
                *command,
                cwd=self.directory,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                env=install_environment(os.environ),
                start_new_session=True,
            )
            try:
                async with asyncio.timeout(self.time_limit):
                    code = await process.wait()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
                log.warning("installing ruff %s took longer than %g s", label, self.time_limit)
                return False
            if code != 0:
                log.warning("could not install ruff %s (the installer exited with %s)", label, code)
                return False
            return await asyncio.to_thread(self._publish, staging, label)
        except OSError as exc:
            log.warning("could not install ruff %s: %s", label, type(exc).__name__)
            return False
        finally:
            await asyncio.to_thread(shutil.rmtree, staging, True)

    def _staging(self, label: str) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{label}-", dir=self.directory))

    def _publish(self, staging: Path, label: str) -> bool:
        if not (staging / "bin" / "ruff").is_file():
            log.warning("the ruff %s package installed no bin/ruff", label)
            return False
        if _size(staging) > self.max_bytes:
            log.warning("ruff %s is larger than %d MB: not kept", label, self.max_bytes // (1024 * 1024))
            return False
        with contextlib.suppress(OSError):  # another process won the race: its copy is used
            staging.rename(self.directory / label)
        return (self.directory / label / "bin" / "ruff").is_file()

    def _used(self, label: str) -> None:
        """Mark ``label`` as just used and remove the least recently used beyond ``keep``, but
        none a review holds (``lease``): its job may still be waiting to run it."""
        with contextlib.suppress(OSError):
            os.utime(self.directory / label)
        installed = [p for p in self.directory.iterdir() if p.is_dir() and not p.name.startswith(".")]
        installed.sort(key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for stale in installed[self.keep :]:
            if stale.name != label and self._leases[stale.name] <= 0:
                shutil.rmtree(stale, ignore_errors=True)
