"""The bot keeps itself under GitHub's rate limits, per installation (``Pacer``).

GitHub's secondary limits (docs.github.com, "Rate limits for the REST API"): 100 requests at
once, 900 points a minute on REST (a read 1, a write 5), 2,000 on GraphQL (a mutation 5), and
content-creating requests (a POST that creates something, a mutation) about 80 a minute and 500
an hour. The pacer keeps a sliding-window log of what each installation spent and holds a
request back until it fits ``PaceLimits`` (nine tenths of GitHub's: the windows GitHub keeps are
not published, and its clock is not ours). So a flood from one installation waits here, in its
own windows, instead of meeting 403s; other installations are not held by it.

Two signals from GitHub hold an installation back too: ``Retry-After`` on a refusal (every
request of the installation waits it out, not only the refused one, which is retried), and the
primary limit spent (``x-ratelimit-remaining: 0``: nothing is sent before ``x-ratelimit-reset``).

The clocks and the sleep are injectable: tests run the pacing on a fake clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

import orjson

# A job whose installation may create content within this many seconds starts now (its
# requests wait the rest in place).
ADMISSION_SLACK = 1.0
# A refusal's Retry-After longer than this means a window is full, not a blip: learn from it.
LEARN_AFTER_SECONDS = 10.0
MAX_TURNS = 10_000  # deferred jobs remembered per installation before stale turns are dropped
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# POSTs that create nothing (an installation token, a manifest's conversion).
NOT_CONTENT = re.compile(r".*/app/installations/\d+/access_tokens|.*/app-manifests/[^/]+/conversions")


class Resource(StrEnum):
    REST = "rest"
    GRAPHQL = "graphql"


@dataclass(frozen=True, slots=True)
class PaceLimits:
    """What the bot allows itself per installation: nine tenths of GitHub's secondary limits."""

    concurrent: int = 90
    rest_points_per_minute: int = 810
    graphql_points_per_minute: int = 1800
    content_per_minute: int = 72
    content_per_hour: int = 450


@dataclass(frozen=True, slots=True)
class Cost:
    resource: Resource
    points: int
    creates_content: bool


def cost_of(method: str, url: str, *, graphql: bool, mutation: bool) -> Cost:
    """What a request spends of GitHub's secondary limits."""
    if graphql:
        return Cost(Resource.GRAPHQL, 5 if mutation else 1, mutation)
    path = url.split("?", 1)[0]
    read = method.upper() in READ_METHODS
    return Cost(Resource.REST, 1 if read else 5, method.upper() == "POST" and not NOT_CONTENT.fullmatch(path))


def is_mutation(body: bytes) -> bool:
    """A GraphQL request body (``{"query": ...}``) whose document is a mutation (the bot's own
    documents start with their operation keyword)."""
    try:
        document = orjson.loads(body).get("query")
    except (orjson.JSONDecodeError, AttributeError):
        return False
    return isinstance(document, str) and document.lstrip().startswith("mutation")


@dataclass(slots=True)
class Window:
    """A sliding window: what was spent when, over the last ``seconds``, at most ``limit``."""

    seconds: float
    limit: int
    spent: deque[tuple[float, int]] = field(default_factory=deque)
    total: int = 0

    def wait(self, now: float, amount: int) -> float:
        """Seconds until ``amount`` more fits (0: now)."""
        while self.spent and self.spent[0][0] <= now - self.seconds:
            self.total -= self.spent.popleft()[1]
        over = self.total + amount - self.limit
        if over <= 0 or amount > self.limit:  # more than a window's worth at once: GitHub decides
            return 0.0
        for at, spent in self.spent:
            over -= spent
            if over <= 0:
                return at + self.seconds - now
        return 0.0

    def add(self, now: float, amount: int) -> None:
        self.spent.append((now, amount))
        self.total += amount

    def used(self, now: float) -> int:
        """What was spent in the window that ends now."""
        while self.spent and self.spent[0][0] <= now - self.seconds:
            self.total -= self.spent.popleft()[1]
        return self.total

    def give_back(self, amount: int) -> None:
        """Uncount the latest request of ``amount`` (one that was refused)."""
        for index in range(len(self.spent) - 1, -1, -1):
            if self.spent[index][1] == amount:
                del self.spent[index]
                self.total -= amount
                return


@dataclass(slots=True)
class _Installation:
    points: dict[Resource, Window]
    content: tuple[Window, Window]
    slots: asyncio.Semaphore
    held_until: float = 0.0  # monotonic: GitHub's Retry-After, or the primary limit's reset
    next_turn: float = 0.0  # monotonic: when the next job deferred for content may start
    restore_at: float = 0.0  # monotonic: when a content budget lowered by a refusal is restored
    turns: dict[str, float] = field(default_factory=dict)  # deferred jobs' turns (``admission``)


class Pacer:
    """Per installation: requests in flight, points and content-creating requests in their
    windows, and GitHub's own holds (``Retry-After``, a spent primary limit)."""

    def __init__(
        self,
        limits: PaceLimits | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.limits = limits or PaceLimits()
        self.clock = clock
        self.wall = wall  # x-ratelimit-reset is epoch seconds
        self.sleep = sleep
        self._installations: dict[int, _Installation] = {}
        self.waited = 0.0  # seconds requests were held back, in all (for the bench and tests)

    def _of(self, installation: int) -> _Installation:
        found = self._installations.get(installation)
        if found is None:
            limits = self.limits
            found = self._installations[installation] = _Installation(
                points={
                    Resource.REST: Window(60.0, limits.rest_points_per_minute),
                    Resource.GRAPHQL: Window(60.0, limits.graphql_points_per_minute),
                },
                content=(Window(60.0, limits.content_per_minute), Window(3600.0, limits.content_per_hour)),
                slots=asyncio.Semaphore(limits.concurrent),
            )
        return found

    def _wait(self, state: _Installation, cost: Cost, now: float) -> float:
        if state.restore_at and now >= state.restore_at:  # an hour without a refusal: GitHub's pace again
            state.content[0].limit, state.restore_at = self.limits.content_per_minute, 0.0
        waits = [state.held_until - now, state.points[cost.resource].wait(now, cost.points)]
        if cost.creates_content:
            waits += [window.wait(now, 1) for window in state.content]
        return max(0.0, *waits)

    def wait_before(self, installation: int, cost: Cost) -> float:
        """Seconds a request would be held back now (requests in flight aside)."""
        return self._wait(self._of(installation), cost, self.clock())

    @contextlib.asynccontextmanager
    async def request(self, installation: int, cost: Cost) -> AsyncIterator[None]:
        """Hold until the request fits the installation's limits, then count it (in flight until
        the block ends)."""
        state = self._of(installation)
        async with state.slots:
            while (wait := self._wait(state, cost, self.clock())) > 0:
                self.waited += wait
                await self.sleep(wait)
            now = self.clock()  # no await since the check: nothing else was counted meanwhile
            state.points[cost.resource].add(now, cost.points)
            if cost.creates_content:
                for window in state.content:
                    window.add(now, 1)
            yield

    def admission(self, installation: int, job: str) -> float:
        """Seconds ``job`` (a key of the caller's: the same for each attempt of one job) of the
        installation should wait before it starts (0: now), so that a job does not start only to
        wait for its writes while holding a worker. When the installation's content-creating
        budget is spent, each job gets its own later turn, one content request's interval after
        the previous one (``Pacer.request`` still counts every request), instead of every
        deferred job coming back at the same moment; a job back at its turn starts."""
        state = self._of(installation)
        now = self.clock()
        turn = state.turns.pop(job, None)
        wait = self._wait(state, Cost(Resource.REST, 0, creates_content=True), now)
        if wait <= ADMISSION_SLACK and (
            (turn is not None and turn <= now + ADMISSION_SLACK) or state.next_turn <= now
        ):
            return 0.0
        if turn is None or turn <= now:
            turn = max(now + wait, state.next_turn)
            state.next_turn = turn + 60.0 / state.content[0].limit
        else:
            turn = max(turn, now + wait)
        state.turns[job] = turn
        if len(state.turns) > MAX_TURNS:  # turns of jobs that never came back (ended elsewhere)
            for stale in [key for key, at in state.turns.items() if at < now - 3600.0]:
                del state.turns[stale]
        return turn - now

    def spare(self, installation: int, *, reserve: float) -> bool:
        """Whether a content-creating request that can be left out (a command's answer) fits now
        without eating into the share of each content window kept for reviews (``reserve``)."""
        state = self._of(installation)
        now = self.clock()
        if state.held_until > now:
            return False
        return all(window.used(now) + 1 <= window.limit * (1.0 - reserve) for window in state.content)

    def hold(self, installation: int, seconds: float) -> None:
        """GitHub refused a request for ``seconds`` (``Retry-After``): the installation waits."""
        state = self._of(installation)
        state.held_until = max(state.held_until, self.clock() + seconds)

    def refused(self, installation: int, cost: Cost, seconds: float) -> None:
        """GitHub refused a request (``Retry-After``: ``seconds``): the installation waits, and
        the refused request is not counted (GitHub did not count it). A content-creating request
        refused for longer than a blip (``LEARN_AFTER_SECONDS``: a window is full) lowers the
        installation's budget to what got through in the last minute, for an hour: GitHub's
        "about 80" is not exact and some endpoints allow less, and otherwise every retry would
        spend the minute again on the writes a job repeats before the refused one."""
        self.hold(installation, seconds)
        state = self._of(installation)
        state.points[cost.resource].give_back(cost.points)
        if not cost.creates_content:
            return
        for window in state.content:
            window.give_back(1)
        if seconds <= LEARN_AFTER_SECONDS:
            return
        minute = state.content[0]
        now = self.clock()
        minute.wait(now, 0)  # forget what left the window
        minute.limit = max(1, min(minute.limit, minute.total))
        state.restore_at = now + 3600.0

    def answered(self, installation: int, headers: Mapping[str, str]) -> None:
        """When the primary limit GitHub reported is spent, hold until its reset (its remaining
        budget is a metric: ``metrics.github_answer``)."""
        lowered = {k.lower(): v for k, v in headers.items()}
        reset = lowered.get("x-ratelimit-reset", "")
        if lowered.get("x-ratelimit-remaining") == "0" and reset.isdigit():
            self.hold(installation, max(1.0, float(reset) - self.wall()))
