"""The GitHub client of one installation (``InstallationClient``), as the serving bot uses it:
its token from the shared cache on every request (a 401 drops that token and retries once with a
fresh one), and its requests paced below GitHub's secondary limits (``ratelimit.Pacer``, shared
by every client of the process), a refusal holding back the installation's other requests too.
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from .auth import InstallationTokens
from .cache import InstallationCache
from .client import GitHubClient, RetryLater
from .ratelimit import Pacer, cost_of, is_mutation

# The bot's own pacing (``ratelimit``) waits in place up to a window's length: a retry would repeat
# the job's earlier writes, spending the very budget it waits for. Longer (the hour's budget, the
# primary limit's reset): the job goes back to the queue.
MAX_PACED_WAIT_SECONDS = 60.0


class InstallationClient(GitHubClient):
    """A client scoped to one installation; its token comes from the shared cache on every
    request, and a 401 drops that token and retries once with a fresh one."""

    installation_id: int

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        installation_id: int,
        tokens: InstallationTokens,
        api_url: str,
        graphql_url: str,
        slug: str | None = None,
        pacer: Pacer | None = None,
        cache: InstallationCache | None = None,
    ) -> None:
        """``pacer``: the process's, shared by every client of the installation (``ratelimit``);
        None: requests go out unpaced (a one-off client, the tests' recorded answers).
        ``cache``: the installation's earlier GET answers, asked again conditionally
        (``cache.py``); None: every GET is a full request."""
        super().__init__(
            session,
            api_url=api_url,
            graphql_url=graphql_url,
            slug=slug,
            installation_id=installation_id,
            cache=cache,
        )
        self._tokens = tokens
        self._pacer = pacer

    async def sleep(self, seconds: float) -> None:
        """gidgethub's wait before it retries a refused request: the pacer's clock when paced."""
        await (self._pacer.sleep(seconds) if self._pacer is not None else super().sleep(seconds))

    def rate_limited(self, method: str, url: str, delay: float) -> None:
        if self._pacer is not None:
            graphql = url == self.graphql_url  # a mutation's body is not at hand: not counted as one
            self._pacer.refused(
                self.installation_id, cost_of(method, url, graphql=graphql, mutation=False), delay
            )

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> tuple[int, Mapping[str, str], bytes]:
        token = await self._tokens.get(self.installation_id)
        response = await self._paced(method, url, {**headers, "authorization": f"token {token}"}, body)
        if response[0] != 401:
            return response
        self._tokens.invalidate(self.installation_id, token)
        token = await self._tokens.get(self.installation_id)
        return await self._paced(method, url, {**headers, "authorization": f"token {token}"}, body)

    async def _paced(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, Mapping[str, str], bytes]:
        """One request within the installation's pace (``ratelimit.Pacer``). A wait longer
        than ``MAX_PACED_WAIT_SECONDS`` sends the job back to the queue instead of holding a
        worker (before this request: what it would have done is done by the retry)."""
        if self._pacer is None:
            return await super()._request(method, url, headers, body)
        graphql = url == self.graphql_url
        cost = cost_of(method, url, graphql=graphql, mutation=graphql and is_mutation(body))
        wait = self._pacer.wait_before(self.installation_id, cost)
        if wait > MAX_PACED_WAIT_SECONDS:
            raise RetryLater(wait, f"pacing {method} {url} under GitHub's rate limits")
        async with self._pacer.request(self.installation_id, cost):
            response = await super()._request(method, url, headers, body)
        self._pacer.answered(self.installation_id, response[1])
        return response
