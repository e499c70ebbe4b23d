"""``python -m app setup``, end to end against the fake GitHub: the local page's form carries
app.yml as a manifest, GitHub's web flow redirects back with a code, the code is exchanged
(``POST /app-manifests/{code}/conversions``, checked against GitHub's OpenAPI description, its
answer too) and ``.env`` is written with mode 0600 and works for the bot."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path

import aiohttp
import pytest
import yaml

from app.ops.setup import (
    MANIFEST_PATH,
    Registered,
    SetupOptions,
    api_url_for,
    env_text,
    registration_url,
    run_setup,
    write_env,
)
from app.sandbox import FakeGitHub
from app.settings.config import load_env_file, load_settings
from tests.conformance import GitHubConformance, validate_response
from tests.harness import free_port

ROOT = Path(__file__).resolve().parents[1]
HOST = "https://revbot.example.org"


class Form(HTMLParser):
    """The page's form: where it posts and its fields."""

    def __init__(self) -> None:
        super().__init__()
        self.action = ""
        self.method = ""
        self.fields: dict[str, str] = {}
        self.buttons: list[str] = []
        self._in_button = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.action, self.method = found["action"], found["method"]
        elif tag == "input":
            self.fields[found["name"]] = found["value"]
        elif tag == "button":
            self._in_button = True

    def handle_data(self, data: str) -> None:
        if self._in_button:
            self.buttons.append(data)
            self._in_button = False


@pytest.fixture
async def github() -> AsyncIterator[FakeGitHub]:
    fake = FakeGitHub(
        app_id=9001, app_slug="revbot", webhook_secret="made-by-github", validator=GitHubConformance()
    )
    await fake.start()
    yield fake
    await fake.stop()
    assert fake.problems == []
    for call in fake.calls:
        assert validate_response(call.method, call.path, call.status, call.response) == [], call


async def start_setup(options: SetupOptions) -> tuple[asyncio.Task[Registered], list[str]]:
    """Start setup; return once its page is up (it says where to open it)."""
    said: list[str] = []
    up = asyncio.Event()

    def say(line: str) -> None:
        said.append(line)
        up.set()

    task = asyncio.create_task(run_setup(options, say=say))
    await asyncio.wait([task, asyncio.create_task(up.wait())], return_when=asyncio.FIRST_COMPLETED)
    assert up.is_set(), task.exception()
    return task, said


async def register(options: SetupOptions) -> tuple[Registered, list[str], Form]:
    """Run setup and act as the person with the browser: open the page, press the button."""
    task, said = await start_setup(options)
    form = Form()
    async with aiohttp.ClientSession() as browser:
        async with browser.get(f"http://127.0.0.1:{options.port}/") as page:
            form.feed(await page.text())
        async with browser.post(form.action, data=form.fields) as landed:  # GitHub redirects back
            assert landed.status == 200, await landed.text()
            assert landed.url.path == "/callback"
            assert "install it on your repositories" in await landed.text()
    return await task, said, form


@pytest.mark.slow
async def test_setup_registers_the_app_and_writes_a_private_env(github: FakeGitHub, tmp_path: Path) -> None:
    env = tmp_path / ".env"
    options = SetupOptions(env_path=env, github_url=github.base_url, host=HOST, port=free_port())
    registered, said, form = await register(options)

    assert form.method == "post" and form.buttons == ["Register GitHub App"]
    assert form.action.startswith(f"{github.base_url}/settings/apps/new?state=")
    manifest = json.loads(form.fields["manifest"])
    template = yaml.safe_load(MANIFEST_PATH.read_text())
    assert manifest["hook_attributes"]["url"] == f"{HOST}/api/github/webhooks"
    assert manifest["redirect_url"] == f"http://localhost:{options.port}/callback"
    assert manifest["default_events"] == template["default_events"]
    assert manifest["default_permissions"] == template["default_permissions"]
    assert github.manifests == [manifest]

    [conversion] = [c for c in github.calls if c.path.startswith("/app-manifests/")]
    assert (conversion.method, conversion.status, conversion.auth) == ("POST", 201, None)
    assert conversion.raw_path.startswith("/api/v3/")  # an Enterprise Server address: GITHUB_URL/api/v3

    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    values: dict[str, str] = {}
    load_env_file(env, values)
    assert values["APP_ID"] == "9001" and values["APP_SLUG"] == "revbot"
    assert values["WEBHOOK_SECRET"] == "made-by-github"
    assert values["PRIVATE_KEY"].strip() == github.private_key_pem.strip()
    assert values["GITHUB_CLIENT_ID"] == conversion.response["client_id"]
    assert values["GITHUB_CLIENT_SECRET"] == conversion.response["client_secret"]
    assert values["GITHUB_API_URL"] == f"{github.base_url}/api/v3"
    settings, pem = load_settings(values)  # the bot starts from it as written
    assert settings.app_id == 9001 and pem.strip() == github.private_key_pem.strip()

    assert registered.install_url == f"{github.base_url}/apps/revbot/installations/new"
    assert said[-1] == f"Install it on your repositories: {registered.install_url}"
    assert github.webhook_url == f"{HOST}/api/github/webhooks"  # the App now sends its webhooks there


@pytest.mark.slow
async def test_an_organization_app_without_a_secret_from_github_gets_one(
    github: FakeGitHub, tmp_path: Path
) -> None:
    github.manifest_returns_webhook_secret = False
    options = SetupOptions(
        env_path=tmp_path / ".env",
        github_url=github.base_url,
        org="octo org",
        port=free_port(),
        proxy_url="https://smee.io/abc123",
    )
    _, _, form = await register(options)
    assert form.action.startswith(f"{github.base_url}/organizations/octo%20org/settings/apps/new?state=")
    assert json.loads(form.fields["manifest"])["hook_attributes"]["url"] == "https://smee.io/abc123"
    values: dict[str, str] = {}
    load_env_file(tmp_path / ".env", values)
    assert len(values["WEBHOOK_SECRET"]) == 64 and values["WEBHOOK_SECRET"] == github.webhook_secret
    assert values["WEBHOOK_PROXY_URL"] == "https://smee.io/abc123"
    [patch] = [c for c in github.calls if c.path == "/app/hook/config"]
    assert (patch.method, patch.auth, patch.status) == ("PATCH", "jwt", 200)


async def test_a_callback_without_the_pages_state_is_refused(github: FakeGitHub, tmp_path: Path) -> None:
    options = SetupOptions(
        env_path=tmp_path / ".env", github_url=github.base_url, host=HOST, port=free_port()
    )
    task, _ = await start_setup(options)
    async with aiohttp.ClientSession() as browser:
        url = f"http://127.0.0.1:{options.port}/callback?code=stolen&state=guessed"
        async with browser.get(url) as answer:
            assert answer.status == 400
    assert not task.done() and not (tmp_path / ".env").exists()
    assert [c for c in github.calls if c.path.startswith("/app-manifests/")] == []
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.slow
def test_an_existing_env_is_never_replaced_without_force(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text("APP_ID=1\n")
    with pytest.raises(FileExistsError):
        write_env(env, "APP_ID=2\n", force=False)
    assert env.read_text() == "APP_ID=1\n"
    write_env(env, "APP_ID=2\n", force=True)
    assert env.read_text() == "APP_ID=2\n" and stat.S_IMODE(env.stat().st_mode) == 0o600
    done = subprocess.run(
        [sys.executable, "-m", "app", "setup", "--host", HOST, "--port", str(free_port())],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--force" in done.stderr and env.read_text() == "APP_ID=2\n"


@pytest.mark.slow
def test_setup_needs_a_webhook_destination(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "WEBHOOK_PROXY_URL"}
    done = subprocess.run(
        [sys.executable, "-m", "app", "setup", "--port", str(free_port())],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--host" in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("github_url", "api_url"),
    [
        ("https://github.com", "https://api.github.com"),
        ("https://github.com/", "https://api.github.com"),
        ("https://ghe.example.com", "https://ghe.example.com/api/v3"),
    ],
)
def test_the_api_address_follows_the_github_address(github_url: str, api_url: str) -> None:
    assert api_url_for(github_url) == api_url


def test_registration_urls() -> None:
    assert (
        registration_url("https://github.com", org=None, state="s")
        == "https://github.com/settings/apps/new?state=s"
    )
    assert (
        registration_url("https://ghe.example.com", org="acme", state="a b")
        == "https://ghe.example.com/organizations/acme/settings/apps/new?state=a+b"
    )


def test_env_text_quotes_what_needs_quoting(tmp_path: Path) -> None:
    app = {
        "id": 5,
        "slug": "s",
        "pem": '-----BEGIN\nline "two"\n-----END',
        "client_id": "Iv1.x",
        "client_secret": "c$",
    }
    path = tmp_path / ".env"
    path.write_text(env_text(app, webhook_secret='a"b\\c', api_url="https://api.github.com", proxy_url=None))
    values: dict[str, str] = {}
    load_env_file(path, values)
    assert values["PRIVATE_KEY"] == app["pem"] and values["WEBHOOK_SECRET"] == 'a"b\\c'
    assert "GITHUB_API_URL" not in values and values["GITHUB_CLIENT_SECRET"] == "c$"
