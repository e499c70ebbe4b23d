"""The credential formats the secrets analyzer knows, a table: each with its prefix and, where
the format has one, its checksum or structure (``TOKEN_RULES``), and its kind in the catalogue.

A format's ``verdict`` says whether a match is really one (a checksum that holds, a random-enough
body: ``ghp_000…`` and ``AIzaSy-your-key-here`` are placeholders, not secrets) and how severe it
is (a Stripe test-mode key and an expired JWT are concerns). Pure.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote

from ..core.model import Severity
from ..core.refusals import EXHAUSTED

__all__ = ["TOKEN_KINDS", "TOKEN_RULES", "TokenRule", "base62_crc32", "shannon_entropy"]

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_DEV_PASSWORDS = frozenset(
    {
        "postgres",
        "mysql",
        "root",
        "admin",
        "guest",
        "pass",
        "passwd",
        "password",
        "secret",
        "user",
        "test",
        "redis",
    }
)


def shannon_entropy(value: str) -> float:
    if not value:
        return 0.0
    counts = Counter(value)
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


@dataclass(frozen=True, slots=True)
class TokenRule:
    """A credential format: where the secret sits in ``pattern`` (group ``value``, or the whole
    match), and ``verdict``: None when a match is not really one (a checksum that fails, a
    placeholder), else ``(kind, severity)``."""

    rule: str
    pattern: re.Pattern[str]
    verdict: Callable[[str], tuple[str, Severity] | None]


def base62_crc32(text: str) -> str:
    """The 6-character base62 CRC32 that ends GitHub's and npm's tokens."""
    number = binascii.crc32(text.encode())
    digits = ""
    while number:
        number, remainder = divmod(number, 62)
        digits = _BASE62[remainder] + digits
    return digits.rjust(6, "0")


def _random_enough(body: str, minimum: float = 3.0) -> bool:
    """A real token's random part is far above ``minimum`` bits per character; ``ghp_000…``,
    ``sk_live_xxxx…`` and ``AIzaSy-your-key-here`` are not (placeholders are not secrets)."""
    lowered = body.lower()
    if any(word in lowered for word in ("example", "your", "xxxx", "dummy", "placeholder", "redacted")):
        return False
    return len(set(body)) > 1 and shannon_entropy(body) >= minimum


def _simple(
    kind: str, body: Callable[[str], str] = lambda token: token, *, minimum: float = 3.0
) -> Callable[[str], tuple[str, Severity] | None]:
    def verdict(token: str) -> tuple[str, Severity] | None:
        return (kind, Severity.BLOCKER) if _random_enough(body(token), minimum) else None

    return verdict


def _github(token: str) -> tuple[str, Severity] | None:
    if token.startswith("github_pat_"):
        return ("GitHub token", Severity.BLOCKER) if _random_enough(token[11:]) else None
    body = token[4:]
    # Since 2021 the last six characters are a checksum of the thirty before them.
    return ("GitHub token", Severity.BLOCKER) if base62_crc32(body[:30]) == body[30:] else None


def _npm(token: str) -> tuple[str, Severity] | None:
    body = token[4:]
    return ("npm token", Severity.BLOCKER) if base62_crc32(body[:30]) == body[30:] else None


def _stripe(token: str) -> tuple[str, Severity] | None:
    if not _random_enough(token.split("_", 2)[2]):
        return None
    if "_test_" in token:
        return "Stripe test-mode key", Severity.CONCERN
    return "Stripe live key", Severity.BLOCKER


def _aws(token: str) -> tuple[str, Severity] | None:
    if "EXAMPLE" in token:
        return None
    return ("AWS access key id", Severity.BLOCKER) if _random_enough(token[4:], 2.5) else None


def _b64json(part: str) -> object:
    try:
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, binascii.Error, *EXHAUSTED):
        return None


def _jwt(token: str) -> tuple[str, Severity] | None:
    header_part, payload_part, _ = token.split(".", 2)
    header, payload = _b64json(header_part), _b64json(payload_part)
    if not isinstance(header, dict) or "alg" not in header or not isinstance(payload, dict):
        return None
    expires = payload.get("exp")
    if isinstance(expires, int | float) and not isinstance(expires, bool) and expires < time.time():
        return "JWT (expired)", Severity.CONCERN
    return "JWT", Severity.BLOCKER


def _url_password(password: str) -> tuple[str, Severity] | None:
    value = unquote(password)
    lowered = value.lower()
    if (
        len(value) < 4
        or lowered in _DEV_PASSWORDS
        or any(mark in value for mark in ("$", "{", "}", "<", ">", "%s", "*", "\u2026", "..."))
        or any(
            word in lowered for word in ("password", "passwd", "secret", "changeme", "example", "your", "xxx")
        )
    ):
        return None
    return "password in a URL", Severity.BLOCKER


_BOUNDARY = r"(?<![A-Za-z0-9_-])"
_END = r"(?![A-Za-z0-9_-])"

TOKEN_RULES: tuple[TokenRule, ...] = (
    TokenRule("secrets/aws-access-key", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), _aws),
    TokenRule(
        "secrets/github-token",
        re.compile(
            r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{82})(?![A-Za-z0-9_])"
        ),
        _github,
    ),
    TokenRule(
        "secrets/gitlab-token",
        re.compile(
            _BOUNDARY + r"(?:gl(?:pat|dt|rt|ptt|cbt|oas|soat|ffct|imt|agent|ft)-[A-Za-z0-9_-]{20,}"
            r"(?:\.[0-9a-z]{2}\.[0-9a-z]{9})?"
            r"|GR1348941[A-Za-z0-9_-]{20,})" + _END
        ),
        _simple("GitLab token", lambda t: t.split("-", 1)[1] if t.startswith("gl") else t[9:]),
    ),
    TokenRule(
        "secrets/slack-token",
        re.compile(
            r"(?<![A-Za-z0-9])(?:xox[abposre]-(?:\d+-)+[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*|xapp-\d-[A-Z0-9]+-\d+-[a-f0-9]{32,})"
        ),
        lambda t: ("Slack token", Severity.BLOCKER) if len(t) >= 24 and _random_enough(t[5:]) else None,
    ),
    TokenRule(
        "secrets/slack-webhook",
        re.compile(
            r"https://hooks\.slack\.com/(?:services/T[A-Z0-9]{8,}/B[A-Z0-9]{8,}/[A-Za-z0-9]{24}"
            r"|(?:workflows|triggers)/T[A-Z0-9]{8,}/A[A-Z0-9]{8,}/\d{8,}/[a-f0-9]{32})"
        ),
        _simple("Slack webhook URL", lambda url: url.rsplit("/", 1)[1]),
    ),
    TokenRule(
        "secrets/stripe-key",
        re.compile(_BOUNDARY + r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{24,247}" + _END),
        _stripe,
    ),
    TokenRule(
        "secrets/openai-key",
        re.compile(
            _BOUNDARY + r"sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,200}|[A-Za-z0-9]{20})"
            r"T3BlbkFJ[A-Za-z0-9_-]{20,200}" + _END
        ),
        _simple("OpenAI API key", lambda t: t.replace("T3BlbkFJ", "")),
    ),
    TokenRule(
        "secrets/anthropic-key",
        re.compile(_BOUNDARY + r"sk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_-]{80,120}AA" + _END),
        _simple("Anthropic API key", lambda t: t.split("-", 3)[3]),
    ),
    TokenRule(
        "secrets/google-api-key",
        re.compile(_BOUNDARY + r"(?:AIza[0-9A-Za-z_-]{35}|GOCSPX-[0-9A-Za-z_-]{28})" + _END),
        _simple("Google API key or OAuth client secret", lambda t: t[4:] if t.startswith("AIza") else t[7:]),
    ),
    TokenRule("secrets/npm-token", re.compile(_BOUNDARY + r"npm_[A-Za-z0-9]{36}" + _END), _npm),
    TokenRule(
        "secrets/pypi-token",
        re.compile(_BOUNDARY + r"pypi-(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,}" + _END),
        _simple("PyPI token", lambda t: t[24:]),
    ),
    TokenRule(
        "secrets/twilio-key",
        re.compile(r"(?<![A-Za-z0-9])SK[0-9a-f]{32}(?![A-Za-z0-9])"),
        _simple("Twilio API key", lambda t: t[2:]),
    ),
    TokenRule(
        "secrets/sendgrid-key",
        re.compile(_BOUNDARY + r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}" + _END),
        _simple("SendGrid API key", lambda t: t[3:]),
    ),
    TokenRule(
        "secrets/azure-storage-key",
        re.compile(r"(?i:AccountKey)\s*=\s*(?P<value>[A-Za-z0-9+/]{86}==)"),
        _simple("Azure storage account key"),
    ),
    TokenRule(
        "secrets/jwt",
        re.compile(_BOUNDARY + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}" + _END),
        _jwt,
    ),
    TokenRule(
        "secrets/url-password",
        re.compile(
            r"\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@\"'`]{0,64}:(?P<value>[^\s:/@\"'`]{1,128})@(?P<host>[A-Za-z0-9.\[\]:_-]+)"
        ),
        _url_password,
    ),
)
TOKEN_KINDS = {  # for the rule catalogue
    "secrets/aws-access-key": "an AWS access key id",
    "secrets/github-token": "a GitHub token",
    "secrets/gitlab-token": "a GitLab token",
    "secrets/slack-token": "a Slack token",
    "secrets/slack-webhook": "a Slack webhook URL",
    "secrets/stripe-key": "a Stripe key (a test-mode key: a concern)",
    "secrets/openai-key": "an OpenAI API key",
    "secrets/anthropic-key": "an Anthropic API key",
    "secrets/google-api-key": "a Google API key",
    "secrets/npm-token": "an npm token",
    "secrets/pypi-token": "a PyPI token",
    "secrets/twilio-key": "a Twilio key",
    "secrets/sendgrid-key": "a SendGrid key",
    "secrets/azure-storage-key": "an Azure storage key",
    "secrets/jwt": "a JSON Web Token (an expired one: a concern)",
    "secrets/url-password": "a password in a URL",
}
