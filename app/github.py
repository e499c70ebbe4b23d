"""The only code that talks to GitHub (with ``auth.py``). It knows HTTP, pagination, retries and
GitHub's error shapes; it knows no business rules.

Two clients over gidgethub's aiohttp flavour:
- ``AppClient`` authenticates as the App (JWT) for ``GET /app`` and minting installation tokens;
- ``InstallationClient`` acts inside one installation, taking its token from the shared cache on
  every request, dropping it and retrying once if GitHub answers 401.

Secondary rate limits (403/429 with ``Retry-After``) are handled in gidgethub 6's
``handle_rate_limit_error`` hook: a short wait is slept in place, a long one becomes
``RetryLater`` so the job goes back to the queue instead of holding a worker slot.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import aiohttp
import gidgethub
import gidgethub.aiohttp

from . import __version__
from .auth import AppJWT, InstallationToken, InstallationTokens

MAX_INLINE_WAIT_SECONDS = 10.0
MAX_INLINE_RETRIES = 2
DEFAULT_RATE_LIMIT_WAIT = 60.0


class RetryLater(Exception):
    """GitHub asked us to come back later (rate limit); the job should be retried after ``delay``."""

    def __init__(self, delay: float, reason: str) -> None:
        super().__init__(f"{reason}; retry in {delay:.0f}s")
        self.delay = delay


class NoAccess(Exception):
    """The App cannot act in this installation (uninstalled, suspended, or repository removed)."""


def user_agent(slug: str | None) -> str:
    return f"revbot/{__version__}" + (f" ({slug})" if slug else "")


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
    if isinstance(exc, RetryLater):
        return exc.delay
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


class _RetryingAPI(gidgethub.aiohttp.GitHubAPI):
    """Waits out short secondary rate limits in place; defers long ones to the queue."""

    async def handle_rate_limit_error(
        self, *, method: str, url: str, exception: gidgethub.HTTPException, attempt: int
    ) -> bool:
        delay = rate_limit_delay(int(exception.status_code), exception.headers, str(exception))
        if delay is None:
            return False
        if delay <= MAX_INLINE_WAIT_SECONDS and attempt <= MAX_INLINE_RETRIES:
            await self.sleep(delay)
            return True
        raise RetryLater(delay, f"GitHub rate limit on {method} {url}") from exception


class AppClient:
    """Calls made as the App itself (JWT), not inside an installation."""

    def __init__(
        self, session: aiohttp.ClientSession, *, app_jwt: AppJWT, api_url: str, slug: str | None = None
    ):
        self._jwt = app_jwt
        self._gh = _RetryingAPI(session, user_agent(slug), base_url=api_url)

    async def get_app(self) -> dict[str, Any]:
        data: dict[str, Any] = await self._gh.getitem("/app", jwt=self._jwt.token())
        return data

    async def mint_installation_token(self, installation_id: int) -> InstallationToken:
        try:
            data = await self._gh.post(
                "/app/installations/{installation_id}/access_tokens",
                {"installation_id": installation_id},
                data=b"",
                jwt=self._jwt.token(),
            )
        except gidgethub.HTTPException as exc:
            if int(exc.status_code) in (401, 403, 404):
                raise NoAccess(
                    f"installation {installation_id}: GitHub answered {int(exc.status_code)}"
                ) from exc
            raise
        return InstallationToken.from_response(data)


class InstallationClient(_RetryingAPI):
    """A gidgethub client scoped to one installation; its token comes from the shared cache."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        installation_id: int,
        tokens: InstallationTokens,
        api_url: str,
        graphql_url: str,
        slug: str | None = None,
    ) -> None:
        super().__init__(session, user_agent(slug), base_url=api_url)
        self.installation_id = installation_id
        self.graphql_url = graphql_url
        self._tokens = tokens

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> tuple[int, Mapping[str, str], bytes]:
        token = await self._tokens.get(self.installation_id)
        response = await super()._request(method, url, {**headers, "authorization": f"token {token}"}, body)
        if response[0] != 401:
            return response
        # The token was revoked or expired early: drop it and try once more with a fresh one.
        self._tokens.invalidate(self.installation_id, token)
        token = await self._tokens.get(self.installation_id)
        return await super()._request(method, url, {**headers, "authorization": f"token {token}"}, body)

    async def query(self, document: str, variables: Mapping[str, Any] | None = None) -> Any:
        """Run a GraphQL document against this deployment's GraphQL endpoint.

        gidgethub's ``graphql()`` ignores ``base_url`` and turns every extra keyword into a
        variable, so the endpoint is always passed and variables go through this one door.
        """
        variables = dict(variables or {})
        reserved = {"endpoint", "query"} & variables.keys()
        if reserved:
            raise ValueError(
                f"GraphQL variables may not be named {sorted(reserved)}: gidgethub reserves them"
            )
        return await self.graphql(document, endpoint=self.graphql_url, **variables)
