"""The App's own calls to GitHub (JWT), not inside an installation: who it is (``GET /app``),
installation tokens, its webhook's configuration and delivery log, and the conversion of a
registered manifest. Every call an installation makes is in ``calls.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import gidgethub

from .auth import AppJWT, InstallationToken
from .calls import PER_PAGE
from .client import RetryingAPI, user_agent
from .errors import NoAccess


class AppClient:
    """Calls made as the App itself (JWT), not inside an installation."""

    def __init__(
        self, session: aiohttp.ClientSession, *, app_jwt: AppJWT, api_url: str, slug: str | None = None
    ):
        self._jwt = app_jwt
        self._gh = RetryingAPI(session, user_agent(slug), base_url=api_url)

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

    # ------------------------------------------------------------------ the App's webhook
    async def get_hook_config(self) -> dict[str, Any]:
        """The App's webhook: ``url``, ``content_type``, ``insecure_ssl`` and ``secret`` (masked) if set."""
        data: dict[str, Any] = await self._gh.getitem("/app/hook/config", jwt=self._jwt.token())
        return data

    async def update_hook_config(self, *, secret: str) -> dict[str, Any]:
        data: dict[str, Any] = await self._gh.patch(
            "/app/hook/config", data={"secret": secret}, jwt=self._jwt.token()
        )
        return data

    async def iter_hook_deliveries(self, *, failed_only: bool = False) -> AsyncIterator[dict[str, Any]]:
        """The App's delivery log, newest first (GitHub keeps 3 days), following the cursor pages."""
        url = f"/app/hook/deliveries?per_page={PER_PAGE}" + ("&status=failure" if failed_only else "")
        async for item in self._gh.getiter(url, jwt=self._jwt.token()):
            yield item

    async def get_hook_delivery(self, *, delivery_id: int) -> dict[str, Any]:
        """One attempt with the request GitHub sent (headers and payload)."""
        data: dict[str, Any] = await self._gh.getitem(
            "/app/hook/deliveries/{delivery_id}", {"delivery_id": delivery_id}, jwt=self._jwt.token()
        )
        return data


async def convert_manifest(session: aiohttp.ClientSession, *, api_url: str, code: str) -> dict[str, Any]:
    """Exchange the code GitHub gave for a registered manifest for the new App's credentials
    (``id``, ``slug``, ``pem``, ``webhook_secret``, ``client_id``, ``client_secret``). No auth: the
    one-time code is the credential."""
    gh = RetryingAPI(session, user_agent(None), base_url=api_url)
    data: dict[str, Any] = await gh.post("/app-manifests/{code}/conversions", {"code": code}, data=b"")
    return data
