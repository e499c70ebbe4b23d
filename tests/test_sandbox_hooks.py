"""The fake GitHub's App webhook: its delivery log (every attempt, failed ones too, as GitHub keeps
them for 3 days), its configuration, and registration from a manifest; held to GitHub's OpenAPI
description like the rest of the fake."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from app.github.auth import AppJWT
from app.sandbox import FakeGitHub
from app.sandbox.webhooks import signature_256
from tests.conformance import GitHubConformance, validate_response
from tests.harness import free_port

SECRET = "hook-secret"
APP_ID = 515


@pytest.fixture
async def fake() -> AsyncIterator[FakeGitHub]:
    github = FakeGitHub(app_id=APP_ID, app_slug="hooks", webhook_secret=SECRET, validator=GitHubConformance())
    await github.start()
    yield github
    await github.stop()
    assert github.problems == []
    for call in github.calls:
        if 200 <= call.status < 300:
            assert validate_response(call.method, call.path, call.status, call.response) == [], call


class Receiver:
    """A webhook endpoint that answers with the statuses it is given, in turn."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.port = free_port()
        self.runner: web.AppRunner | None = None

    async def handle(self, _request: web.Request) -> web.Response:
        return web.json_response({"seen": True}, status=self.statuses.pop(0))

    async def __aenter__(self) -> str:
        app = web.Application()
        app.router.add_post("/hook", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()
        return f"http://127.0.0.1:{self.port}/hook"

    async def __aexit__(self, *_: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


async def get(fake: FakeGitHub, path: str) -> tuple[int, Any, Any]:
    token = AppJWT(APP_ID, fake.private_key_pem).token()
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json"}
    async with (
        aiohttp.ClientSession() as session,
        session.get(fake.base_url + path, headers=headers) as answer,
    ):
        return answer.status, await answer.json(), answer.headers


def opened(fake: FakeGitHub) -> dict[str, Any]:
    fake.add_installation(1, "octo")
    fake.add_repo("octo/repo", installation_id=1)
    fake.push("octo/repo", "main", {"a": "1\n"})
    fake.push("octo/repo", "feature", {"a": "2\n"})
    number = fake.open_pull("octo/repo", head="feature", author="alice")["number"]
    return fake.pull_request_payload("octo/repo", number, "opened", sender="alice")


@pytest.mark.slow
async def test_every_attempt_is_logged_with_its_outcome(fake: FakeGitHub) -> None:
    payload = opened(fake)
    async with Receiver([503, 202]) as url:
        fake.webhook_url = url
        assert await fake.send_webhook("pull_request", payload, delivery_id="g") == 503
        assert await fake.send_webhook("pull_request", payload, delivery_id="g") == 202
    fake.webhook_url = f"http://127.0.0.1:{free_port()}/nobody"
    await fake.send_webhook("pull_request", payload, delivery_id="h")

    status, items, _ = await get(fake, "/app/hook/deliveries")
    assert status == 200
    assert [(i["guid"], i["status_code"], i["status"], i["redelivery"]) for i in items] == [
        ("h", 502, "failed to connect", False),
        ("g", 202, "OK", True),
        ("g", 503, "Invalid HTTP Response: 503", False),
    ]
    _, failed, _ = await get(fake, "/app/hook/deliveries?status=failure")
    assert [i["guid"] for i in failed] == ["h", "g"]

    status, full, _ = await get(fake, f"/app/hook/deliveries/{items[2]['id']}")
    assert status == 200 and full["request"]["payload"]["pull_request"]["number"] == payload["number"]
    assert (full["event"], full["action"], full["installation_id"]) == ("pull_request", "opened", 1)
    body = json.dumps(full["request"]["payload"], separators=(",", ":")).encode()
    assert full["request"]["headers"]["X-GitHub-Delivery"] == "g"
    assert full["request"]["headers"]["X-Hub-Signature-256"] == signature_256(SECRET, body)
    assert full["response"]["payload"] == '{"seen": true}'
    assert (await get(fake, "/app/hook/deliveries/999"))[0] == 404


@pytest.mark.slow
async def test_the_log_pages_by_cursor_and_forgets_after_3_days(fake: FakeGitHub) -> None:
    now = time.time()
    for n in range(5):
        fake.hooks.add(
            guid=f"d{n}",
            event="push",
            payload={},
            url="http://x",
            request_headers={},
            status_code=202,
            error=None,
            duration=0.1,
            at=now - (5 - n),
        )
    fake.hooks.add(
        guid="ancient",
        event="push",
        payload={},
        url="http://x",
        request_headers={},
        status_code=502,
        error="failed to connect",
        duration=0.1,
        at=now - 4 * 86400,
    )
    seen: list[str] = []
    path = "/app/hook/deliveries?per_page=2"
    while path:
        status, items, headers = await get(fake, path)
        assert status == 200
        seen += [i["guid"] for i in items]
        link = headers.get("Link", "")
        path = link.split(";")[0].strip("<>").removeprefix(fake.base_url) if 'rel="next"' in link else ""
    assert seen == ["d4", "d3", "d2", "d1", "d0"]
    assert (await get(fake, "/app/hook/deliveries?cursor=bogus"))[0] == 400


@pytest.mark.slow
async def test_the_hook_config_shows_whether_a_secret_is_set(fake: FakeGitHub) -> None:
    fake.webhook_url = "https://bot.example.com/api/github/webhooks"
    _, config, _ = await get(fake, "/app/hook/config")
    assert config == {
        "url": fake.webhook_url,
        "content_type": "json",
        "insecure_ssl": "0",
        "secret": "********",
    }
    fake.set_webhook_secret("")
    _, config, _ = await get(fake, "/app/hook/config")
    assert "secret" not in config


@pytest.mark.slow
@pytest.mark.parametrize(
    ("manifest", "why"),
    [
        ("not json", "Invalid GitHub App manifest"),
        (json.dumps({"url": "https://x", "hook_attributes": {"url": "https://x/h"}, "bogus": 1}), "bogus"),
        (json.dumps({"url": "https://x", "hook_attributes": {}}), "hook_attributes.url"),
        (json.dumps({"url": "https://x", "hook_attributes": {"url": "https://x/h"}}), "redirect_url"),
    ],
)
async def test_a_bad_manifest_is_refused_on_githubs_page(fake: FakeGitHub, manifest: str, why: str) -> None:
    async with (
        aiohttp.ClientSession() as browser,
        browser.post(
            f"{fake.base_url}/settings/apps/new?state=s", data={"manifest": manifest}, allow_redirects=False
        ) as answer,
    ):
        assert answer.status == 422 and why in await answer.text()


async def test_a_manifest_code_converts_once(fake: FakeGitHub) -> None:
    manifest = {
        "name": "hooks",
        "url": "https://x",
        "hook_attributes": {"url": "https://x/h"},
        "redirect_url": "http://localhost:1/cb",
    }
    async with aiohttp.ClientSession() as browser:
        async with browser.post(
            f"{fake.base_url}/settings/apps/new?state=s1",
            data={"manifest": json.dumps(manifest)},
            allow_redirects=False,
        ) as answer:
            assert answer.status == 302
            location = answer.headers["Location"]
        assert location.startswith("http://localhost:1/cb?code=") and location.endswith("&state=s1")
        code = location.split("code=")[1].split("&")[0]
        url = f"{fake.base_url}/app-manifests/{code}/conversions"
        async with browser.post(url) as first:
            assert first.status == 201
            app = await first.json()
        async with browser.post(url) as second:
            assert second.status == 404
    assert app["id"] == APP_ID and app["pem"] == fake.private_key_pem and app["webhook_secret"] == SECRET
    assert fake.webhook_url == "https://x/h"
