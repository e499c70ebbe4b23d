"""What a failed GitHub call means: a rate limit's wait (``rate_limit_delay``), whether trying
again may help (``transient_delay``), or that the App may not act there at all (``NoAccess``).

Pure over gidgethub's and aiohttp's exceptions and GitHub's headers; the clients
(``calls.py``) and the worker read these. ``client.RetryLater`` is no error to classify: it is
GitHub's own word on when to come back, and its callers handle it before anything else.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import aiohttp
import gidgethub

DEFAULT_RATE_LIMIT_WAIT = 60.0


class NoAccess(Exception):
    """The App cannot act in this installation (uninstalled, suspended, or repository removed)."""


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    if not headers:
        return None
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def rate_limit_delay(
    status: int, headers: Mapping[str, str] | None, message: str = "", now: float | None = None
) -> float | None:
    """Seconds GitHub asks us to wait, or None when the error is not a rate limit.

    GitHub signals secondary limits with 403 or 429 and ``Retry-After``; primary limits with
    ``x-ratelimit-remaining: 0`` and a reset time; some secondary limits only by their message.
    """
    if status not in (403, 429):
        return None
    retry_after = _header(headers, "retry-after")
    if retry_after is not None:
        try:
            return max(0.0, float(retry_after))
        except ValueError:
            return DEFAULT_RATE_LIMIT_WAIT
    if _header(headers, "x-ratelimit-remaining") == "0":
        reset = _header(headers, "x-ratelimit-reset")
        if reset is not None and reset.isdigit():
            return max(1.0, float(reset) - (now if now is not None else time.time()))
        return DEFAULT_RATE_LIMIT_WAIT
    if status == 429 or "rate limit" in message.lower():
        return DEFAULT_RATE_LIMIT_WAIT
    return None


def transient_delay(exc: BaseException) -> float | None:
    """Classify an error from a GitHub call: a delay hint (0 = use the backoff) if retrying may
    help, None if it is permanent."""
    if isinstance(exc, gidgethub.GitHubBroken):  # 5xx
        return 0.0
    if isinstance(exc, gidgethub.HTTPException):
        delay = rate_limit_delay(int(exc.status_code), exc.headers, str(exc))
        return delay
    if isinstance(exc, gidgethub.QueryError):
        errors = exc.response.get("errors", []) if isinstance(exc.response, dict) else []
        if any(isinstance(e, dict) and e.get("type") == "RATE_LIMITED" for e in errors):
            return DEFAULT_RATE_LIMIT_WAIT
        return None
    if isinstance(exc, aiohttp.ClientConnectionError | aiohttp.ClientPayloadError | TimeoutError):
        return 0.0
    return None
