"""GitHub's rate limits, as the fake enforces them (docs.github.com, "Rate limits for the REST
API"): the primary limit's headers on every answer, and the secondary limits.

Per identity (an installation's token, the App's JWT, or no credentials):
- at most 100 requests at once (REST and GraphQL together);
- at most 900 points a minute on REST (GET, HEAD, OPTIONS 1 point, every other method 5) and
  2,000 on GraphQL (a query 1, a mutation 5);
- at most 80 content-creating requests a minute and 500 an hour (a POST that creates something,
  a GraphQL mutation; minting a token creates nothing);
- the primary limit: 5,000 requests an hour per resource (``core``, ``graphql``), which every
  answer reports in ``x-ratelimit-limit``, ``-remaining``, ``-used``, ``-reset`` (epoch seconds)
  and ``-resource``.

GitHub does not publish its windows; these are sliding (the last 60 or 3,600 seconds), the
strict reading. A request over a secondary limit is answered 403 (or 429) with ``Retry-After``:
the seconds until the window lets it through, and GitHub's body; over the primary limit, 403
with ``x-ratelimit-remaining: 0`` and the reset. A refused request is not counted. The limits
are GitHub's by default and can be lowered (``FakeGitHub.rate_limits``); they run on their own
clock (``FakeGitHub.rate_clock``, real time unless a test injects one), apart from the world's
timestamps, which tests freeze.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

SECONDARY_DOCS = (
    "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits"
)
PRIMARY_DOCS = (
    "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-primary-rate-limits"
)
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# POSTs that create no content: an installation token, a manifest's conversion.
NOT_CONTENT = re.compile(r"/app/installations/\d+/access_tokens|/app-manifests/[^/]+/conversions")


class Resource(StrEnum):
    CORE = "core"
    GRAPHQL = "graphql"


@dataclass(frozen=True, slots=True)
class RateLimits:
    """The limits the fake enforces: GitHub's own unless lowered."""

    concurrent: int = 100
    rest_points_per_minute: int = 900
    graphql_points_per_minute: int = 2000
    content_per_minute: int = 80
    content_per_hour: int = 500
    primary_per_hour: int = 5000
    refusal_status: int = 403  # GitHub answers 403 or 429


@dataclass(frozen=True, slots=True)
class Cost:
    resource: Resource
    points: int
    creates_content: bool


def cost_of(method: str, path: str, *, mutation: bool) -> Cost:
    """What one request spends (GitHub's documented points; some endpoints cost more unpublished)."""
    if path == "/graphql":
        return Cost(Resource.GRAPHQL, 5 if mutation else 1, mutation)
    read = method in READ_METHODS
    return Cost(Resource.CORE, 1 if read else 5, method == "POST" and not NOT_CONTENT.fullmatch(path))


@dataclass(slots=True)
class _Window:
    """A sliding window: what was spent when, over the last ``seconds``."""

    seconds: float
    spent: deque[tuple[float, int]] = field(default_factory=deque)
    total: int = 0

    def forget(self, now: float) -> None:
        while self.spent and self.spent[0][0] <= now - self.seconds:
            self.total -= self.spent.popleft()[1]

    def wait(self, now: float, amount: int, limit: int) -> float:
        """Seconds until ``amount`` more fits under ``limit`` (0: now)."""
        self.forget(now)
        over = self.total + amount - limit
        if over <= 0:
            return 0.0
        for at, spent in self.spent:
            over -= spent
            if over <= 0:
                return at + self.seconds - now
        return self.seconds  # more than the limit in one request: never, as GitHub; a window

    def add(self, now: float, amount: int) -> None:
        self.spent.append((now, amount))
        self.total += amount

    def give_back(self) -> None:
        """Undo the latest ``add`` of one (a request that turned out not to count)."""
        for index in range(len(self.spent) - 1, -1, -1):
            if self.spent[index][1] == 1:
                del self.spent[index]
                self.total -= 1
                return


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int
    message: str
    headers: dict[str, str]
    documentation_url: str


@dataclass(slots=True)
class _Identity:
    in_flight: int = 0
    points: dict[Resource, _Window] = field(
        default_factory=lambda: {Resource.CORE: _Window(60.0), Resource.GRAPHQL: _Window(60.0)}
    )
    content_minute: _Window = field(default_factory=lambda: _Window(60.0))
    content_hour: _Window = field(default_factory=lambda: _Window(3600.0))
    primary: dict[Resource, _Window] = field(
        default_factory=lambda: {Resource.CORE: _Window(3600.0), Resource.GRAPHQL: _Window(3600.0)}
    )


class Limiter:
    """The fake's bookkeeping of every identity's limits."""

    def __init__(self, limits: RateLimits, clock: Callable[[], float], wall: Callable[[], float]) -> None:
        self.limits = limits
        self.clock = clock  # the windows' (monotonic seconds)
        self.wall = wall  # for x-ratelimit-reset, which is epoch seconds
        self._identities: dict[str, _Identity] = {}
        self.refused: list[tuple[str, str, str]] = []  # (identity, method, path) of each refusal

    def _of(self, who: str) -> _Identity:
        return self._identities.setdefault(who, _Identity())

    def begin(self, who: str, method: str, path: str, *, mutation: bool) -> Refusal | None:
        """Admit a request (counted in flight until ``end``) or say why not (nothing counted)."""
        limits, now = self.limits, self.clock()
        identity = self._of(who)
        cost = cost_of(method, path, mutation=mutation)
        if identity.in_flight >= limits.concurrent:
            return self._refuse(who, method, path, 1.0)
        primary = identity.primary[cost.resource]
        if primary.wait(now, 1, limits.primary_per_hour) > 0:
            self.refused.append((who, method, path))
            reset = self._reset(primary, now)
            return Refusal(
                limits.refusal_status,
                f"API rate limit exceeded for {who}.",
                {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
                PRIMARY_DOCS,
            )
        graphql = cost.resource is Resource.GRAPHQL
        points_limit = limits.graphql_points_per_minute if graphql else limits.rest_points_per_minute
        waits = [identity.points[cost.resource].wait(now, cost.points, points_limit)]
        if cost.creates_content:
            waits.append(identity.content_minute.wait(now, 1, limits.content_per_minute))
            waits.append(identity.content_hour.wait(now, 1, limits.content_per_hour))
        wait = max(waits)
        if wait > 0:
            return self._refuse(who, method, path, wait)
        identity.in_flight += 1
        identity.points[cost.resource].add(now, cost.points)
        primary.add(now, 1)
        if cost.creates_content:
            identity.content_minute.add(now, 1)
            identity.content_hour.add(now, 1)
        return None

    def end(self, who: str, *, counted: bool = True) -> None:
        """The request is answered; ``counted=False``: a 304, which the primary limit gives back."""
        identity = self._of(who)
        identity.in_flight -= 1
        if not counted:
            identity.primary[Resource.CORE].give_back()

    def _refuse(self, who: str, method: str, path: str, wait: float) -> Refusal:
        self.refused.append((who, method, path))
        message = (
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try "
            "again. If you reach out to GitHub Support for help, please include the request ID."
        )
        return Refusal(
            self.limits.refusal_status, message, {"Retry-After": str(max(1, math.ceil(wait)))}, SECONDARY_DOCS
        )

    def _reset(self, primary: _Window, now: float) -> int:
        """When the oldest request of the hour leaves the window, in epoch seconds."""
        oldest = primary.spent[0][0] if primary.spent else now
        return math.ceil(self.wall() + (oldest + primary.seconds - now))

    def headers(self, who: str, resource: Resource) -> dict[str, str]:
        """The primary limit as every answer reports it."""
        now = self.clock()
        primary = self._of(who).primary[resource]
        primary.forget(now)
        used = primary.total
        return {
            "X-RateLimit-Limit": str(self.limits.primary_per_hour),
            "X-RateLimit-Remaining": str(max(0, self.limits.primary_per_hour - used)),
            "X-RateLimit-Reset": str(self._reset(primary, now)),
            "X-RateLimit-Used": str(used),
            "X-RateLimit-Resource": resource.value,
        }
