"""Conditional requests: the fake answers ``If-None-Match``/``If-Modified-Since`` as GitHub does
(304, no body, not counted against the primary limit), and the bot asks them for what it read
before, per installation, from a cache bounded in bytes, never serving a stale answer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from app.github.cache import ResponseCache
from app.metrics import REGISTRY
from tests.harness import REPO, BotHarness

DECOY = "revbot"
MAINTAINER = "maria"


def budget(kind: str) -> float:
    value = REGISTRY.get_sample_value("revbot_github_requests_total", {"budget": kind})
    return value or 0.0


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[BotHarness]:
    harness = BotHarness(tmp_path)
    harness.fake.add_user(DECOY)
    harness.fake.add_user(MAINTAINER)
    harness.fake.set_association(REPO, MAINTAINER, "MEMBER")
    yield harness
    await harness.stop()
    harness.assert_conforms()


async def token_for(bot: BotHarness) -> str:
    """An installation token, minted over HTTP with the App's JWT as the bot does."""
    assert bot.runtime is not None and bot.runtime.tokens is not None
    return await bot.runtime.tokens.get(next(iter(bot.fake.world.installations)))


async def get(url: str, token: str, **headers: str) -> tuple[int, Mapping[str, str], bytes]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, headers={"Authorization": f"token {token}", **headers}) as response,
    ):
        return response.status, response.headers.copy(), await response.read()  # case-insensitive


@pytest.mark.e2e
async def test_the_fake_answers_304_as_github_does_and_does_not_count_it(bot: BotHarness) -> None:
    number = bot.open_pull({"a.py": "x = 1\n"})
    await bot.start()
    token = await token_for(bot)
    url = f"{bot.fake.api_url}/repos/{REPO}/pulls/{number}"
    status, headers, body = await get(url, token)
    assert status == 200 and body and headers["ETag"].startswith('W/"')
    etag, modified = headers["ETag"], headers["Last-Modified"]
    remaining = int(headers["X-RateLimit-Remaining"])

    status, again, body = await get(url, token, **{"If-None-Match": etag})
    assert (status, body) == (304, b"")
    assert again["ETag"] == etag
    assert int(again["X-RateLimit-Remaining"]) == remaining  # a 304 is not counted
    assert (await get(url, token, **{"If-Modified-Since": modified}))[0] == 304
    assert (await get(url, token, **{"If-None-Match": '"something else"'}))[0] == 200
    # If-None-Match decides when both are sent (RFC 9110): a stale tag is a full answer
    assert (await get(url, token, **{"If-None-Match": '"stale"', "If-Modified-Since": modified}))[0] == 200

    bot.fake.push(REPO, "feature", {"a.py": "x = 2\n"})  # the pull request changes (its head)
    status, changed, body = await get(url, token, **{"If-None-Match": etag})
    assert status == 200 and body and changed["ETag"] != etag
    assert changed["Last-Modified"] != modified
    assert (await get(url, token, **{"If-Modified-Since": modified}))[0] == 200
    mine = [c for c in bot.fake.calls if c.path == f"/repos/{REPO}/pulls/{number}"]
    assert [c.status for c in mine].count(304) == 2
    # What the fake records as counted (replay's api_counted) is what its rate limit reports
    assert [c.counted for c in mine] == [c.status != 304 for c in mine]
    _, after, _ = await get(url, token)
    assert int(headers["X-RateLimit-Remaining"]) - int(after["X-RateLimit-Remaining"]) == sum(
        c.counted for c in mine
    )


@pytest.mark.e2e
async def test_the_bot_asks_again_conditionally_and_never_reads_a_stale_answer(bot: BotHarness) -> None:
    number = bot.open_pull({"src/app.py": "def f():\n    return undefined_name\n"})
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=MAINTAINER)
    await bot.drain()
    first = len(bot.fake.calls)
    not_modified_before = budget("not_modified")

    # The same head reviewed again ("Re-run"): its files and tree are asked for again (the pull
    # request's state is one GraphQL request, which is never conditional).
    [run] = [r.id for r in bot.fake.world.check_runs.values() if r.name == "revbot review"]
    await bot.fake.rerequest_check_run(REPO, run, by=MAINTAINER)
    await bot.drain()
    again = [c for c in bot.fake.calls[first:] if c.method == "GET"]
    assert any(c.status == 304 for c in again), [(c.path, c.status) for c in again]
    assert budget("not_modified") - not_modified_before == sum(c.status == 304 for c in again)

    head = bot.fake.push(REPO, "feature", {"src/app.py": "def f():\n    return 1\n"})
    await bot.drain()
    await bot.fake.request_review(REPO, number, DECOY, by=MAINTAINER)
    await bot.drain()
    reviews: list[dict[str, Any]] = [
        c.body
        for c in bot.fake.calls
        if c.method == "POST" and c.path.endswith("/reviews") and c.status == 200
    ]
    assert reviews[-1]["commit_id"] == head  # the new head was read, not a cached one


def test_each_installation_sees_only_its_own_answers() -> None:
    cache = ResponseCache(1 << 20)
    one, two = cache.for_installation(1), cache.for_installation(2)
    one["/repos/a/b/pulls/1"] = ('W/"1"', None, {"title": "one's"}, None)
    assert "/repos/a/b/pulls/1" not in two
    assert list(one) == ["/repos/a/b/pulls/1"] and len(two) == 0
    with pytest.raises(KeyError):
        two["/repos/a/b/pulls/1"]


def test_what_a_caller_changes_is_not_what_the_next_caller_reads() -> None:
    view = ResponseCache(1 << 20).for_installation(1)
    view["/x"] = ('W/"1"', None, {"labels": ["a"]}, None)
    first = view["/x"][2]
    first["labels"].append("changed by a caller")
    assert view["/x"][2] == {"labels": ["a"]}


def test_the_cache_is_bounded_in_bytes_least_recently_used_first() -> None:
    cache = ResponseCache(4096)
    view = cache.for_installation(1)
    for n in range(20):
        view[f"/page/{n}"] = (f'W/"{n}"', None, {"patch": "x" * 500}, None)
    assert cache.bytes <= 4096
    assert "/page/19" in view and "/page/0" not in view
    view["/huge"] = ('W/"h"', None, {"patch": "x" * 10_000}, None)  # larger than the whole cache
    assert "/huge" not in view and "/page/19" in view
