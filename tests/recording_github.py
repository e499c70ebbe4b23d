"""A recording fake of GitHub behind the ``app.github.calls`` helpers, for fast handler and use-case tests.

In the style of algorithms-keeper's ``MockGitHubAPI``: ``RecordingGitHub`` is the bot's own
``GitHubClient`` (so gidgethub builds every request and reads every answer, paging and errors
included) with only the HTTP exchange replaced. It answers from a table keyed by method and
path (the query string is ignored; ``POST /graphql`` answers may be functions of the document;
the ``PullState`` query is answered from the table's REST answers, ``recording_state``),
records every call, and fails the test on a request the table does not expect. Nothing is
started: a test runs in milliseconds. The end-to-end tests (``tests/harness.py``) keep what only
a whole GitHub can show: echoes of the bot's writes, GitHub's rules, the queue.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, cast

import aiohttp

from app.github.client import GitHubClient
from app.guards import BotIdentity
from app.review.core.model import Reviewer
from app.review.engine.builtin import BuiltinReviewer
from app.settings.config import Settings
from app.usecases.bot import Bot
from app.usecases.learnings import InMemoryLearnings
from app.usecases.pull import AnalysisCache, RepoConfigs
from tests.recording_state import pull_state

API = "https://api.github.test"
GRAPHQL = f"{API}/graphql"
REPO = "octo/widgets"
IDENTITY = BotIdentity.from_slug("revbot")  # the decoy is the user "revbot"

Answer: TypeAlias = Any | tuple[int, Any] | Callable[[Any], Any]


class UnexpectedRequest(AssertionError):
    """The code under test asked GitHub for something the test did not expect."""


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    path: str  # without the query string
    data: Any  # the decoded JSON body, None without one


class RecordingGitHub(GitHubClient):
    def __init__(self, answers: Mapping[tuple[str, str], Answer] | None = None) -> None:
        # No session: _request below is the only door out, and it never leaves the process.
        super().__init__(cast(aiohttp.ClientSession, None), api_url=API, graphql_url=GRAPHQL)
        self.answers: dict[tuple[str, str], Answer] = dict(answers or {})
        self.calls: list[Call] = []

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> tuple[int, Mapping[str, str], bytes]:
        path = url.removeprefix(API).partition("?")[0]
        data = json.loads(body) if body else None
        self.calls.append(Call(method, path, data))
        if method == "POST" and path == "/graphql" and "query PullState" in str((data or {})["query"]):
            state = pull_state(self.answer, cast(dict[str, Any], data)["variables"])
            return 200, {"content-type": "application/json; charset=utf-8"}, json.dumps(state).encode()
        if (method, path) not in self.answers:
            raise UnexpectedRequest(f"{method} {path} {data!r}")
        answer = self.answers[(method, path)]
        if callable(answer):
            answer = answer(data)
        status, payload = answer if isinstance(answer, tuple) else (200, answer)
        if method == "POST" and path == "/graphql" and status == 200:
            payload = {"data": payload}
        return status, {"content-type": "application/json; charset=utf-8"}, json.dumps(payload).encode()

    def answer(self, method: str, path: str) -> tuple[int, Any] | None:
        """The table's answer to a GET (status and body), None when it has none."""
        if (method, path) not in self.answers:
            return None
        found = self.answers[(method, path)]
        found = found(None) if callable(found) else found
        return found if isinstance(found, tuple) else (200, found)

    def writes(self) -> list[tuple[str, str]]:
        """What the code changed on GitHub (every request but GETs and GraphQL queries)."""
        return [
            (c.method, c.path)
            for c in self.calls
            if c.method != "GET" and not (c.path == "/graphql" and "mutation" not in c.data["query"])
        ]

    def reads(self) -> list[tuple[str, str]]:
        return [(c.method, c.path) for c in self.calls if c.method == "GET"]

    def pulls_read(self) -> list[str]:
        """The pull requests whose state was read (``GET`` of one, or the ``PullState`` query:
        it, its reviews, conversation, threads, check runs and settings), as their REST paths."""
        return [
            f"/repos/{c.data['variables']['owner']}/{c.data['variables']['name']}/pulls/"
            f"{c.data['variables']['number']}"
            if c.path == "/graphql"
            else c.path
            for c in self.calls
            if ((c.method, c.path) == ("POST", "/graphql") and "query PullState" in c.data["query"])
            or (c.method == "GET" and re.fullmatch(r"/repos/[^/]+/[^/]+/pulls/\d+", c.path))
        ]


class RecordingTimers:
    """``Timers`` that remember what was asked (the queue is the store's business)."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.clock = now
        self.asked: list[tuple[str, int, float]] = []
        self.handed: list[str] = []

    def now(self) -> float:
        return self.clock

    async def look_again(
        self, *, repo: str, pr_number: int, installation_id: int, at: float, since: float
    ) -> None:
        self.asked.append((repo, pr_number, at))

    async def look_now(
        self, *, timer_id: str, repo: str, pr_number: int, installation_id: int, since: float
    ) -> None:
        self.handed.append(timer_id)


def make_bot(
    *, reviewer: Reviewer | None = None, timers: RecordingTimers | None = None, **settings: Any
) -> Bot:
    return Bot(
        identity=IDENTITY,
        settings=Settings.model_validate(
            {"app_id": 1, "webhook_secret": "x", "private_key": "unused", **settings}
        ),
        reviewer=reviewer or BuiltinReviewer(),
        repo_configs=RepoConfigs(),
        analyses=AnalysisCache(),
        learnings=InMemoryLearnings(),
        timers=timers or RecordingTimers(),
    )


def repo_config(yaml_text: str | None) -> dict[tuple[str, str], Answer]:
    """The answers for reading ``.github/revbot.yml`` (None: no such file, here or in the owner's
    ``.github`` repository)."""
    path = f"/repos/{REPO}/contents/.github/revbot.yml"
    if yaml_text is None:
        owner_defaults = "/repos/octo/.github/contents/.github/revbot.yml"
        return {("GET", path): (404, {"message": "Not Found"}), ("GET", owner_defaults): (404, {})}
    content = base64.b64encode(yaml_text.encode()).decode()
    return {("GET", path): {"type": "file", "encoding": "base64", "content": content}}


def pull(number: int = 1, *, state: str = "open", **fields: Any) -> dict[str, Any]:
    return {
        "number": number,
        "state": state,
        "head": {"sha": "a" * 40},
        "base": {"sha": "b" * 40},
        "user": {"login": "alice"},
        "requested_reviewers": [],
        **fields,
    }
