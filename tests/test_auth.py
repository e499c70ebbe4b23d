"""The App's JWT and the installation-token cache (time is a fake clock; no sleeping)."""

from __future__ import annotations

import asyncio

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from app.github.auth import AppJWT, InstallationToken, InstallationTokens


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_jwt_is_rs256_backdated_and_short_lived(private_key_pem: str) -> None:
    clock = Clock()
    token = AppJWT(12345, private_key_pem, clock=clock).token()
    key = load_pem_private_key(private_key_pem.encode(), None)
    assert isinstance(key, RSAPrivateKey)
    public = key.public_key()
    assert jwt.get_unverified_header(token)["alg"] == "RS256"
    claims = jwt.decode(
        token, public, algorithms=["RS256"], options={"verify_exp": False, "verify_iat": False}
    )
    assert claims["iss"] == "12345"
    assert claims["iat"] == int(clock.now) - 60
    assert 0 < claims["exp"] - claims["iat"] <= 600
    assert claims["exp"] > clock.now


def test_jwt_is_reused_for_a_while_then_reminted(private_key_pem: str) -> None:
    clock = Clock()
    app_jwt = AppJWT(1, private_key_pem, clock=clock)
    first = app_jwt.token()
    clock.now += 299
    assert app_jwt.token() == first
    clock.now += 2
    assert app_jwt.token() != first


class Minter:
    def __init__(self, clock: Clock, lifetime: float = 3600) -> None:
        self.clock = clock
        self.lifetime = lifetime
        self.calls: list[int] = []
        self.gate: asyncio.Event | None = None

    async def __call__(self, installation_id: int) -> InstallationToken:
        self.calls.append(installation_id)
        if self.gate is not None:
            await self.gate.wait()
        return InstallationToken(
            token=f"ghs_{installation_id}_{len(self.calls)}", expires_at=self.clock.now + self.lifetime
        )


async def test_tokens_are_cached_per_installation_and_refreshed_five_minutes_early() -> None:
    clock = Clock()
    mint = Minter(clock)
    tokens = InstallationTokens(mint, clock=clock)
    assert await tokens.get(7) == "ghs_7_1"
    assert await tokens.get(8) == "ghs_8_2"
    clock.now += 3600 - 301
    assert await tokens.get(7) == "ghs_7_1"
    clock.now += 2  # now less than 5 minutes before expires_at
    assert await tokens.get(7) == "ghs_7_3"
    assert mint.calls == [7, 8, 7]


async def test_concurrent_callers_share_one_refresh() -> None:
    clock = Clock()
    mint = Minter(clock)
    mint.gate = asyncio.Event()
    tokens = InstallationTokens(mint, clock=clock)
    waiters = [asyncio.create_task(tokens.get(7)) for _ in range(10)]
    await asyncio.sleep(0)
    mint.gate.set()
    assert set(await asyncio.gather(*waiters)) == {"ghs_7_1"}
    assert mint.calls == [7]


async def test_a_failed_mint_reaches_every_waiter_and_is_not_cached() -> None:
    clock = Clock()
    calls = 0

    async def failing(installation_id: int) -> InstallationToken:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0)
        raise ConnectionError("down")

    tokens = InstallationTokens(failing, clock=clock)
    results = await asyncio.gather(*(tokens.get(3) for _ in range(3)), return_exceptions=True)
    assert all(isinstance(r, ConnectionError) for r in results)
    assert calls == 1
    with pytest.raises(ConnectionError):
        await tokens.get(3)
    assert calls == 2


async def test_invalidate_drops_only_the_token_that_failed() -> None:
    clock = Clock()
    tokens = InstallationTokens(Minter(clock), clock=clock)
    old = await tokens.get(5)
    tokens.invalidate(5, "some other token")
    assert await tokens.get(5) == old
    tokens.invalidate(5, old)
    assert await tokens.get(5) != old


def test_the_token_never_shows_in_a_repr() -> None:
    token = InstallationToken.from_response(
        {"token": "ghs_secretsecret", "expires_at": "2030-01-01T00:00:00Z"}
    )
    assert "ghs_secret" not in repr(token)
    assert token.expires_at == 1893456000.0
