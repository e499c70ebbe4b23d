"""The client: gidgethub's aiohttp ``GitHubAPI`` with the bot's retries, metrics and the
deployment's GraphQL endpoint. ``calls.py`` holds what is asked of it.

Secondary rate limits (403/429 with ``Retry-After``) are handled in gidgethub 6's
``handle_rate_limit_error`` hook: a short wait is slept in place, a long one becomes
``RetryLater`` so the job goes back to the queue instead of holding a worker slot.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

import aiohttp
import gidgethub
import gidgethub.aiohttp

from .. import __version__, metrics
from .errors import rate_limit_delay

MAX_INLINE_WAIT_SECONDS = 10.0
MAX_INLINE_RETRIES = 2


class RetryLater(Exception):
    """GitHub asked us to come back later (rate limit); the job should be retried after ``delay``."""

    def __init__(self, delay: float, reason: str) -> None:
        super().__init__(f"{reason}; retry in {delay:.0f}s")
        self.delay = delay


def user_agent(slug: str | None) -> str:
    return f"revbot/{__version__}" + (f" ({slug})" if slug else "")


class RetryingAPI(gidgethub.aiohttp.GitHubAPI):
    """Waits out short secondary rate limits in place; defers long ones to the queue. Every
    request is counted by status, and the rate limit GitHub reports is kept (metrics)."""

    requests = 0  # requests sent, retries included: did a handler talk to GitHub at all
    # Whose rate limit the requests spend (metrics, pacing); None: the App itself (JWT), or a
    # token of no installation (the command line's, the tests' recorded answers).
    installation_id: int | None = None

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> tuple[int, Mapping[str, str], bytes]:
        self.requests += 1
        try:
            response = await super()._request(method, url, headers, body)
        except (aiohttp.ClientError, TimeoutError):
            metrics.github_answer("error", None, self.installation_id)
            raise
        metrics.github_answer(response[0], response[1], self.installation_id)
        return response

    def rate_limited(self, method: str, url: str, delay: float) -> None:
        """GitHub refused a request for ``delay`` seconds (an installation's client holds its
        other requests back too)."""

    async def handle_rate_limit_error(
        self, *, method: str, url: str, exception: gidgethub.HTTPException, attempt: int
    ) -> bool:
        delay = rate_limit_delay(int(exception.status_code), exception.headers, str(exception))
        if delay is None:
            return False
        self.rate_limited(method, url, delay)
        if delay <= MAX_INLINE_WAIT_SECONDS and attempt <= MAX_INLINE_RETRIES:
            await self.sleep(delay)
            return True
        raise RetryLater(delay, f"GitHub rate limit on {method} {url}") from exception


class GitHubClient(RetryingAPI):
    """gidgethub over aiohttp, plus the deployment's GraphQL endpoint (REST base and GraphQL URL
    differ on GitHub Enterprise Server)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        api_url: str,
        graphql_url: str,
        slug: str | None = None,
        oauth_token: str | None = None,
        installation_id: int | None = None,
        cache: MutableMapping[str, Any] | None = None,
    ) -> None:
        super().__init__(session, user_agent(slug), base_url=api_url, oauth_token=oauth_token, cache=cache)
        self.installation_id = installation_id
        self.graphql_url = graphql_url

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
