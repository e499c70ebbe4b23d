"""``python -m app setup``: register the GitHub App from ``app.yml`` and write ``.env``.

GitHub's manifest flow (what Probot users know): a local page posts the manifest to GitHub,
the person confirms there, GitHub sends the browser back with a one-time code, and the code is
exchanged (``POST /app-manifests/{code}/conversions``) for the new App's id, key and secrets.
They are written to ``.env`` (mode 0600, never over an existing one without ``--force``), which
``serve``, ``worker`` and ``doctor`` load at startup.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import logging
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import gidgethub
import yaml
from aiohttp import web

from ..github.app import AppClient, convert_manifest
from ..github.auth import AppJWT
from ..settings.config import ConfigError

log = logging.getLogger(__name__)

DEFAULT_GITHUB_URL = "https://github.com"
WEBHOOK_PATH = "/api/github/webhooks"
MANIFEST_PATH = Path(__file__).resolve().parents[2] / "app.yml"


@dataclass(frozen=True, slots=True)
class SetupOptions:
    env_path: Path
    github_url: str = DEFAULT_GITHUB_URL
    host: str | None = None  # the bot's public base URL (webhooks go to host + WEBHOOK_PATH)
    proxy_url: str | None = None  # a smee.io-style channel instead of a public host
    org: str | None = None
    port: int = 3000  # the local page
    force: bool = False
    manifest_path: Path = MANIFEST_PATH


def api_url_for(github_url: str) -> str:
    """github.com's REST API lives on api.github.com; GitHub Enterprise Server's at /api/v3."""
    base = github_url.rstrip("/")
    if base in ("https://github.com", "http://github.com"):
        return "https://api.github.com"
    return base + "/api/v3"


def webhook_url(options: SetupOptions) -> str:
    if options.host:
        return options.host.rstrip("/") + WEBHOOK_PATH
    if options.proxy_url:
        return options.proxy_url
    raise ConfigError("--host", "give the bot's public URL (or set WEBHOOK_PROXY_URL for local development)")


def manifest_for(template: Mapping[str, Any], *, hook_url: str, redirect_url: str) -> dict[str, Any]:
    """``app.yml`` with this deployment's webhook URL and the local page to come back to."""
    manifest = dict(template)
    manifest["hook_attributes"] = {
        **dict(template.get("hook_attributes") or {}),
        "url": hook_url,
        "active": True,
    }
    manifest["redirect_url"] = redirect_url
    return manifest


def registration_url(github_url: str, *, org: str | None, state: str) -> str:
    where = f"/organizations/{quote(org, safe='')}/settings/apps/new" if org else "/settings/apps/new"
    return f"{github_url.rstrip('/')}{where}?{urlencode({'state': state})}"


def _quoted(value: str) -> str:
    """A double-quoted .env value (python-dotenv and docker's --env-file read newlines as \\n)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def env_text(app: Mapping[str, Any], *, webhook_secret: str, api_url: str, proxy_url: str | None) -> str:
    lines = [
        "# Written by `python -m app setup`; keep it secret (mode 0600), never commit it.",
        f"APP_ID={int(app['id'])}",
        f"APP_SLUG={app['slug']}",
        f"WEBHOOK_SECRET={_quoted(webhook_secret)}",
        f"PRIVATE_KEY={_quoted(str(app['pem']).strip())}",
        f"GITHUB_CLIENT_ID={app['client_id']}",
        f"GITHUB_CLIENT_SECRET={_quoted(str(app['client_secret']))}",
    ]
    if api_url != "https://api.github.com":
        lines.append(f"GITHUB_API_URL={api_url}")
    if proxy_url:
        lines.append(f"WEBHOOK_PROXY_URL={proxy_url}")
    return "\n".join(lines) + "\n"


def write_env(path: Path, text: str, *, force: bool) -> None:
    """Write ``text`` readable by the owner only, atomically; never replace a file unless ``force``."""
    if path.exists() and not force:
        raise FileExistsError(f"{path} exists; run with --force to replace it")
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(scratch, 0o600)  # O_CREAT's mode is filtered by the umask; make sure
        if not force and path.exists():
            raise FileExistsError(f"{path} exists; run with --force to replace it")
        os.replace(scratch, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(scratch)


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Register revbot</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 3em auto">
<h1>Register the GitHub App</h1>
<p>GitHub will ask you to confirm the App's name{owner}. Its webhooks will go to
<code>{hook_url}</code>.</p>
<form action="{action}" method="post">
<input type="hidden" name="manifest" value="{manifest}">
<button type="submit">Register GitHub App</button>
</form>
</body></html>
"""

DONE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>revbot registered</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 3em auto">
<h1>{name} is registered</h1>
<p>Its settings are in <code>{env}</code>. Now
<a href="{install}">install it on your repositories</a>, then start the bot.</p>
</body></html>
"""


@dataclass(frozen=True, slots=True)
class Registered:
    slug: str
    app_id: int
    install_url: str


class SetupServer:
    """The local page and the callback GitHub redirects to."""

    def __init__(self, options: SetupOptions, session: aiohttp.ClientSession) -> None:
        template = yaml.safe_load(options.manifest_path.read_text(encoding="utf-8"))
        self.options = options
        self.session = session
        self.state = secrets.token_urlsafe(16)
        self.hook_url = webhook_url(options)
        self.manifest = manifest_for(
            template, hook_url=self.hook_url, redirect_url=f"http://localhost:{options.port}/callback"
        )
        self.done: asyncio.Future[Registered] = asyncio.get_running_loop().create_future()

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/", self.page)
        app.router.add_get("/callback", self.callback)
        return app

    async def page(self, _request: web.Request) -> web.Response:
        owner = (
            f" and create it in the {html.escape(self.options.org)} organization" if self.options.org else ""
        )
        body = PAGE.format(
            owner=owner,
            hook_url=html.escape(self.hook_url),
            action=html.escape(
                registration_url(self.options.github_url, org=self.options.org, state=self.state)
            ),
            manifest=html.escape(json.dumps(self.manifest), quote=True),
        )
        return web.Response(text=body, content_type="text/html")

    async def callback(self, request: web.Request) -> web.Response:
        code = request.query.get("code", "")
        if not secrets.compare_digest(request.query.get("state", ""), self.state) or not code:
            return web.Response(status=400, text="This is not the answer to the registration started here.")
        if self.done.done():
            return web.Response(status=409, text="The App was registered already; see the terminal.")
        api_url = api_url_for(self.options.github_url)
        try:
            app = await convert_manifest(self.session, api_url=api_url, code=code)
            secret = app.get("webhook_secret") or await self._set_secret(app, api_url)
            write_env(
                self.options.env_path,
                env_text(app, webhook_secret=secret, api_url=api_url, proxy_url=self.options.proxy_url),
                force=self.options.force,
            )
        except (gidgethub.GitHubException, aiohttp.ClientError, TimeoutError, OSError) as exc:
            self.done.set_exception(exc)
            return web.Response(status=502, text=f"Registration failed: {type(exc).__name__}: {exc}")
        registered = Registered(
            slug=str(app["slug"]), app_id=int(app["id"]), install_url=f"{app['html_url']}/installations/new"
        )
        self.done.set_result(registered)
        page = DONE.format(
            name=html.escape(str(app.get("name") or app["slug"])),
            env=html.escape(str(self.options.env_path)),
            install=html.escape(registered.install_url),
        )
        return web.Response(text=page, content_type="text/html")

    async def _set_secret(self, app: Mapping[str, Any], api_url: str) -> str:
        """GitHub did not make a webhook secret: make one and set it on the App's webhook."""
        secret = secrets.token_hex(32)
        client = AppClient(self.session, app_jwt=AppJWT(int(app["id"]), str(app["pem"])), api_url=api_url)
        await client.update_hook_config(secret=secret)
        return secret


async def run_setup(
    options: SetupOptions, *, say: Callable[[str], None] = print, host: str = "127.0.0.1"
) -> Registered:
    """Serve the page until GitHub's redirect came back and ``.env`` is written."""
    if options.env_path.exists() and not options.force:
        raise FileExistsError(f"{options.env_path} exists; run with --force to replace it")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        server = SetupServer(options, session)
        runner = web.AppRunner(server.application(), access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, options.port).start()
            say(f"Open http://localhost:{options.port} in your browser and press 'Register GitHub App'.")
            registered = await server.done
        finally:
            await runner.cleanup()
    say(f"Registered {registered.slug} (App id {registered.app_id}); settings written to {options.env_path}.")
    say(f"Install it on your repositories: {registered.install_url}")
    return registered
