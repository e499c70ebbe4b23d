"""GitHub App authentication: the App's JWT and per-installation access tokens.

The JWT (RS256) identifies the App itself; GitHub rejects one whose ``iat`` is in its future or
whose lifetime exceeds 10 minutes, so ``iat`` is backdated 60 s for clock drift. Installation
tokens live an hour; they are cached per installation and refreshed at least 5 minutes before
``expires_at``, and concurrent callers wait on one refresh instead of minting several.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

import jwt
from cachetools import TLRUCache
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key

JWT_BACKDATE_SECONDS = 60
JWT_LIFETIME_SECONDS = 9 * 60  # with the backdating, exp - iat = 10 min, GitHub's maximum
JWT_REUSE_SECONDS = 5 * 60
TOKEN_REFRESH_MARGIN_SECONDS = 5 * 60


@functools.lru_cache(maxsize=8)
def signing_key(private_key_pem: str) -> RSAPrivateKey:
    """The App's key, parsed: loading an RSA private key checks it, which costs tens of
    milliseconds, and PyJWT would do it again for every token given the PEM text."""
    key = load_pem_private_key(private_key_pem.encode(), password=None)
    if not isinstance(key, RSAPrivateKey):
        raise ValueError("the App's private key is not RSA (GitHub Apps sign with RS256)")
    return key


class AppJWT:
    """Mints the App's JWT, reusing one for a few minutes (signing costs ~1 ms of RSA).

    The PEM is parsed on the first mint, once per process (``signing_key``)."""

    def __init__(self, app_id: int, private_key_pem: str, *, clock: Callable[[], float] = time.time) -> None:
        self._app_id = app_id
        self._pem = private_key_pem
        self._clock = clock
        self._cached: tuple[str, float] | None = None

    def token(self) -> str:
        now = self._clock()
        if self._cached is not None and now < self._cached[1]:
            return self._cached[0]
        issued = int(now) - JWT_BACKDATE_SECONDS
        claims = {"iat": issued, "exp": int(now) + JWT_LIFETIME_SECONDS, "iss": str(self._app_id)}
        encoded = jwt.encode(claims, signing_key(self._pem), algorithm="RS256")
        self._cached = (encoded, now + JWT_REUSE_SECONDS)
        return encoded


@dataclass(frozen=True, slots=True)
class InstallationToken:
    token: str
    expires_at: float  # epoch seconds

    @classmethod
    def from_response(cls, data: dict[str, object]) -> InstallationToken:
        expires = str(data["expires_at"]).replace("Z", "+00:00")
        return cls(token=str(data["token"]), expires_at=datetime.fromisoformat(expires).timestamp())

    def __repr__(self) -> str:  # never show the token itself
        return f"InstallationToken(expires_at={self.expires_at})"


MintToken = Callable[[int], Awaitable[InstallationToken]]


class InstallationTokens:
    """Per-installation token cache (cachetools TLRU: each entry expires at its own refresh time)."""

    def __init__(
        self,
        mint: MintToken,
        *,
        margin_seconds: float = TOKEN_REFRESH_MARGIN_SECONDS,
        clock: Callable[[], float] = time.time,
        maxsize: int = 4096,
    ) -> None:
        self._mint = mint
        self._margin = margin_seconds
        self._clock = clock
        self._cache: TLRUCache[int, InstallationToken] = TLRUCache(
            maxsize=maxsize, ttu=lambda _key, value, _now: value.expires_at - self._margin, timer=clock
        )
        self._inflight: dict[int, asyncio.Future[InstallationToken]] = {}

    async def get(self, installation_id: int) -> str:
        cached = self._cache.get(installation_id)
        if cached is not None:
            return cached.token
        pending = self._inflight.get(installation_id)
        if pending is not None:
            return (await asyncio.shield(pending)).token
        future: asyncio.Future[InstallationToken] = asyncio.get_running_loop().create_future()
        self._inflight[installation_id] = future
        try:
            minted = await self._mint(installation_id)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            # Waiters receive the exception; retrieve it here so an unawaited future does not warn.
            future.exception()
            raise
        finally:
            del self._inflight[installation_id]
        self._cache[installation_id] = minted
        future.set_result(minted)
        return minted.token

    def invalidate(self, installation_id: int, token: str | None = None) -> None:
        """Drop a cached token (GitHub answered 401). With ``token``, only if it is still that one,
        so a refresh that already happened is not thrown away."""
        cached = self._cache.get(installation_id)
        if cached is not None and (token is None or cached.token == token):
            del self._cache[installation_id]
