"""Structured logging: one JSON object per line in production, readable lines in a terminal.

Context (delivery id, event, repo, PR number, job id) travels in context variables so every line
logged while handling a job carries it without threading it through calls. A last-line filter
masks anything shaped like a GitHub token, a JWT or a private key header, and the literal values
of every secret the process was configured with (``mask_configured``: the webhook secret, the
App's private key, the model key, the metrics token, the GitHub client secret), in case one
slips into a message.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, TextIO

from pydantic import BaseModel, SecretStr

CONTEXT_FIELDS = ("delivery_id", "event", "repo", "pr_number", "job_id")
_context: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("revbot_log_context", default={})  # noqa: B039 - never mutated, only replaced

_SECRET_PATTERNS = re.compile(
    r"(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----)"
)


MIN_MASKED_LENGTH = 4  # a shorter value would mask every word it is part of
MIN_MASKED_KEY_LINE = 16  # a private key is masked line by line too (a traceback may hold one)


class _Literals:
    """The configured secrets' values, as one pattern (longest first, so none is half-masked)."""

    values: frozenset[str] = frozenset()
    pattern: re.Pattern[str] | None = None

    @classmethod
    def add(cls, values: Iterable[str]) -> None:
        cls.values |= {v for v in values if len(v) >= MIN_MASKED_LENGTH}
        ordered = sorted(cls.values, key=len, reverse=True)
        cls.pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None


def mask_values(values: Iterable[str]) -> None:
    """Mask these literal values in every line logged from now on (they add up: several
    runtimes may share a process)."""
    _Literals.add(values)


def secret_values(settings: BaseModel, *extra: str) -> list[str]:
    """Every ``SecretStr`` value of ``settings``, with ``extra`` (the private key read from its
    file), and each long line of a multi-line one (a PEM's base64 lines), and the ``\\n``-escaped
    form a PEM in an environment variable takes."""
    whole = [
        value.get_secret_value()
        for name in type(settings).model_fields
        if isinstance(value := getattr(settings, name), SecretStr)
    ]
    whole += extra
    found = set(whole)
    for value in whole:
        found |= {line.strip() for line in value.splitlines() if len(line.strip()) >= MIN_MASKED_KEY_LINE}
        found.add(value.replace("\n", "\\n"))
    return sorted(found)


def mask_configured(settings: BaseModel, *extra: str) -> None:
    """Mask every secret ``settings`` holds (and ``extra``) in the logs."""
    mask_values(secret_values(settings, *extra))


def redact(text: str) -> str:
    """``text`` with token-, JWT- and key-shaped strings and every configured secret masked."""
    pattern = _Literals.pattern  # first: a pattern could split a configured value
    if pattern is not None:
        text = pattern.sub("[redacted]", text)
    return _SECRET_PATTERNS.sub("[redacted]", text)


def describe_failure(exc: BaseException) -> str:
    """One masked line naming an exception, short enough for a health answer or a log line."""
    return redact(f"{type(exc).__name__}: {exc}".splitlines()[0])[:300]


@contextlib.contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Add fields to every log line emitted inside the block (and tasks it starts)."""
    token = _context.set({**_context.get(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


class _ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in _context.get().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": redact(record.getMessage()),
        }
        for key in CONTEXT_FIELDS:
            value = getattr(record, key, None)
            if value is not None:
                entry[key] = value
        if record.exc_info:
            entry["exc"] = redact(self.formatException(record.exc_info))
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        context = " ".join(
            f"{key}={getattr(record, key)}"
            for key in CONTEXT_FIELDS
            if getattr(record, key, None) is not None
        )
        when = datetime.fromtimestamp(record.created).strftime("%H:%M:%S")
        line = f"{when} {record.levelname:<7} {record.name}: {redact(record.getMessage())}"
        if context:
            line += f"  [{context}]"
        if record.exc_info:
            line += "\n" + redact(self.formatException(record.exc_info))
        return line


def setup_logging(
    level: int = logging.INFO, *, stream: TextIO | None = None, json_lines: bool | None = None
) -> None:
    """Configure the root logger once; JSON unless the stream is a terminal (or told otherwise)."""
    out = stream or sys.stderr
    use_json = json_lines if json_lines is not None else not out.isatty()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter() if use_json else TextFormatter())
    handler.addFilter(_ContextFilter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    # aiohttp's access log is one line per delivery at high volume; keep it at warning and above.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


class Outage:
    """A failing dependency, logged once per outage rather than once per attempt.

    The first failure logs a WARNING naming what fails and why; later failures only count; the
    first success after them logs how long it lasted. A poll loop retrying every second during a
    ten-minute database outage therefore writes two lines, not six hundred.
    """

    def __init__(
        self, logger: logging.Logger, what: str, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._log = logger
        self.what = what
        self._clock = clock
        self.since: float | None = None
        self.failures = 0
        self.error: str | None = None

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, exc: BaseException, *, during: str | None = None) -> None:
        """Count a failure; the first of an outage is logged (``during``: what was being done)."""
        self.failures += 1
        self.error = describe_failure(exc)
        if self.since is None:
            self.since = self._clock()
            self._log.warning(
                "%s failed%s (%s); retrying with backoff until it works",
                self.what,
                f" while {during}" if during else "",
                self.error,
            )

    def recovered(self) -> None:
        if self.since is None:
            return
        self._log.info(
            "%s works again after %.1fs (%d failed attempt(s))",
            self.what,
            self._clock() - self.since,
            self.failures,
        )
        self.since = None
        self.failures = 0
        self.error = None
