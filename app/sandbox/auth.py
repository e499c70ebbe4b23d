"""App JWTs and installation tokens, checked the way GitHub checks them.

GitHub verifies the App's JWT with the App's public key (RS256), wants ``iss`` to be the App id
(string or number), rejects ``iat`` more than 60 s in its future, an ``exp`` already past, and a
lifetime (``exp - iat``) over 10 minutes. Installation tokens are opaque ``ghs_`` strings that
work until they expire or are revoked.
"""

from __future__ import annotations

import functools
import secrets
import string
import time
from collections.abc import Callable
from dataclasses import dataclass

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from .state import Token, iso

MAX_JWT_LIFETIME = 600
MAX_CLOCK_SKEW = 60
_TOKEN_ALPHABET = string.ascii_letters + string.digits
_IAT = "'Issued at' claim ('iat')"
_EXP = "'Expiration time' claim ('exp')"
_EXP_FUTURE = f"{_EXP} must be a numeric value representing the future time at which the assertion expires."


class AuthError(Exception):
    """Authentication failed; ``message`` is what GitHub would say in the 401 body."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def generate_private_key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@functools.lru_cache(maxsize=64)  # loading a private key checks it: tens of milliseconds
def public_key_pem(private_key_pem: str) -> str:
    key = serialization.load_pem_private_key(private_key_pem.encode(), password=None)
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def looks_like_jwt(credential: str) -> bool:
    return credential.count(".") == 2 and credential.startswith("eyJ")


def split_authorization(header: str | None) -> tuple[str, str] | None:
    """``("bearer"|"token", credential)`` from an Authorization header, case-insensitive scheme."""
    if not header:
        return None
    scheme, _, credential = header.strip().partition(" ")
    scheme, credential = scheme.lower(), credential.strip()
    if scheme not in ("bearer", "token") or not credential:
        return None
    return scheme, credential


def verify_app_jwt(token: str, public_key: str, app_id: int, *, now: float | None = None) -> None:
    """Raise ``AuthError`` unless ``token`` is a JWT this App signed and GitHub would accept now."""
    moment = time.time() if now is None else now
    try:
        claims = jwt.decode(
            token,
            public_key,
            algorithms=["RS256"],
            options={"verify_exp": False, "verify_iat": False, "verify_nbf": False, "verify_iss": False},
        )
    except jwt.PyJWTError:
        raise AuthError("A JSON web token could not be decoded") from None
    iat, exp, iss = claims.get("iat"), claims.get("exp"), claims.get("iss")
    if not isinstance(iat, int) or isinstance(iat, bool):
        raise AuthError(f"{_IAT} must be an Integer representing the time that the assertion was issued.")
    if not isinstance(exp, int) or isinstance(exp, bool):
        raise AuthError(_EXP_FUTURE)
    if str(iss) != str(app_id):
        raise AuthError("'Issuer' claim ('iss') must be the App id.")
    if iat > moment + MAX_CLOCK_SKEW:
        raise AuthError(f"{_IAT} must be an Integer representing a time in the past.")
    if exp <= moment:
        raise AuthError(_EXP_FUTURE)
    if exp - iat > MAX_JWT_LIFETIME:
        raise AuthError(f"{_EXP} is too far in the future")


@dataclass
class Issued:
    token: Token
    expires_at_iso: str


class TokenStore:
    """Installation tokens issued so far, by value."""

    def __init__(self, lifetime: float, *, clock: Callable[[], float] = time.time) -> None:
        self.lifetime = lifetime
        self.clock = clock  # tests move it to expire tokens without waiting
        self._tokens: dict[str, Token] = {}

    def issue(self, installation_id: int, *, now: float | None = None) -> Issued:
        moment = self.clock() if now is None else now
        value = "ghs_" + "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(36))
        token = Token(value, installation_id, moment + self.lifetime)
        self._tokens[value] = token
        return Issued(token, iso(token.expires_at))

    def find(self, value: str) -> Token | None:
        return self._tokens.get(value)

    def check(self, value: str, *, now: float | None = None) -> Token:
        """The live token with this value, or ``AuthError("Bad credentials")``."""
        token = self._tokens.get(value)
        moment = self.clock() if now is None else now
        if token is None or token.revoked or token.expires_at <= moment:
            raise AuthError("Bad credentials")
        return token

    def revoke_all(self) -> None:
        for token in self._tokens.values():
            token.revoked = True
