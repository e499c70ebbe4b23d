"""Every credential rule, table-driven: at least three generated fakes it must find and three
near-misses it must leave alone, the severity where it sits, and ``redact_secrets``.

No credential-shaped literal is in this file: every sample is assembled at run time from a seeded
generator (prefixes, checksums and all), so neither GitHub's push protection nor our own scanner
finds one in the repository.
"""

from __future__ import annotations

import base64
import json
import random
import string
import time
from collections.abc import Callable

import pytest

from app.review.analyzers.secret_tokens import TOKEN_RULES, base62_crc32
from app.review.analyzers.secrets import SecretsAnalyzer, redact_secrets, scan_lines
from app.review.core.model import Severity
from tests.test_review_analyzers import run, under_review

_RNG = random.Random(20261130)
ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "_-"
HEX = "0123456789abcdef"
UPPER_DIGITS = string.ascii_uppercase + string.digits


def rand(alphabet: str, length: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(length))


def j(*parts: str) -> str:
    """Join parts, so no sample appears whole in the source."""
    return "".join(parts)


def with_crc(prefix: str) -> str:
    body = rand(ALNUM, 30)
    return j(prefix, body, base62_crc32(body))


def jwt(payload: dict[str, object], header: dict[str, object] | None = None) -> str:
    def part(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return ".".join([part(header or {"alg": "HS256", "typ": "JWT"}), part(payload), rand(URLSAFE, 43)])


OPENAI_MARK = j("T3Blbk", "FJ")
FUTURE = int(time.time()) + 10 * 365 * 86400

# rule -> (factory of a positive sample, factories of negatives that look close)
Sample = Callable[[], str]
RULES: dict[str, tuple[list[Sample], list[Sample]]] = {
    "secrets/aws-access-key": (
        [lambda: j("AKIA", rand(UPPER_DIGITS, 16)), lambda: j("ASIA", rand(UPPER_DIGITS, 16))] * 2,
        [
            lambda: j("AKIA", "IOSFODNN7", "EXAMPLE"),  # AWS's documented example id
            lambda: j("AKIA", "0" * 16),
            lambda: j("AKIA", rand(UPPER_DIGITS, 12)),  # too short
        ],
    ),
    "secrets/github-token": (
        [
            lambda: with_crc("ghp_"),
            lambda: with_crc("gho_"),
            lambda: with_crc("ghs_"),
            lambda: with_crc("ghu_"),
        ],
        [
            lambda: j("ghp_", rand(ALNUM, 36)),  # right shape, checksum wrong
            lambda: j("ghp_", "x" * 36),
            lambda: j("ghp_", rand(ALNUM, 20)),
        ],
    ),
    "secrets/gitlab-token": (
        [
            lambda: j("glpat-", rand(URLSAFE, 20)),
            lambda: j("gldt-", rand(URLSAFE, 24)),
            lambda: j("glrt-", rand(URLSAFE, 20)),
        ],
        [
            lambda: j("glpat-", "x" * 20),
            lambda: j("glpat-", rand(URLSAFE, 8)),
            lambda: j("glpat-", "your", "-", "token", "-", "here", "-1234"),
        ],
    ),
    "secrets/slack-token": (
        [
            lambda: j("xoxb-", rand(string.digits, 12), "-", rand(string.digits, 13), "-", rand(ALNUM, 24)),
            lambda: j("xoxp-", rand(string.digits, 12), "-", rand(string.digits, 12), "-", rand(ALNUM, 32)),
            lambda: j("xapp-1-", rand(UPPER_DIGITS, 11), "-", rand(string.digits, 13), "-", rand(HEX, 64)),
        ],
        [
            lambda: j("xoxb-", "your-token-here"),
            lambda: j("xoxb-", "1234-", "short"),
            lambda: j("xoxz-", rand(string.digits, 12), "-", rand(ALNUM, 24)),  # no such kind
        ],
    ),
    "secrets/slack-webhook": (
        [
            lambda: j(
                "https://hooks.slack",
                ".com/services/T",
                rand(UPPER_DIGITS, 10),
                "/B",
                rand(UPPER_DIGITS, 10),
                "/",
                rand(ALNUM, 24),
            )
        ]
        * 3,
        [
            lambda: j("https://hooks.slack", ".com/services/T00000000/B00000000/", "X" * 24),
            lambda: j("https://hooks.slack", ".com/services/TXXXXXXXX/BXXXXXXXX/", "x" * 24),
            lambda: j(
                "https://hooks.slack", ".com/services/T", rand(UPPER_DIGITS, 10), "/B", rand(UPPER_DIGITS, 10)
            ),
        ],
    ),
    "secrets/stripe-key": (
        [lambda: j("sk_", "live_", rand(ALNUM, 24)), lambda: j("rk_", "live_", rand(ALNUM, 99))] * 2,
        [
            lambda: j("pk_", "live_", rand(ALNUM, 24)),  # publishable: public by design
            lambda: j("sk_", "live_", rand(ALNUM, 10)),
            lambda: j("sk_", "live_", "x" * 24),
        ],
    ),
    "secrets/openai-key": (
        [
            lambda: j("sk-", rand(ALNUM, 20), OPENAI_MARK, rand(ALNUM, 20)),
            lambda: j("sk-", "proj-", rand(URLSAFE, 74), OPENAI_MARK, rand(URLSAFE, 74)),
            lambda: j("sk-", "svcacct-", rand(URLSAFE, 58), OPENAI_MARK, rand(URLSAFE, 58)),
        ],
        [
            lambda: j("sk-", rand(ALNUM, 48)),  # no OpenAI marker: any "sk-" string
            lambda: j("sk-", "proj-", rand(URLSAFE, 40)),
            lambda: j("task-", rand(ALNUM, 20), OPENAI_MARK, rand(ALNUM, 20)),
        ],
    ),
    "secrets/anthropic-key": (
        [
            lambda: j("sk-", "ant-", "api03-", rand(URLSAFE, 93), "AA"),
            lambda: j("sk-", "ant-", "admin01-", rand(URLSAFE, 93), "AA"),
            lambda: j("sk-", "ant-", "api03-", rand(URLSAFE, 93), "AA"),
        ],
        [
            lambda: j("sk-", "ant-", "api03-", rand(URLSAFE, 20), "AA"),
            lambda: j("sk-", "ant-", "api03-", "x" * 93, "AA"),
            lambda: j("sk-", "ant-", rand(URLSAFE, 95)),
        ],
    ),
    "secrets/google-api-key": (
        [
            lambda: j("AIza", rand(URLSAFE, 35)),
            lambda: j("AIza", "Sy", rand(URLSAFE, 33)),
            lambda: j("GOCSPX", "-", rand(URLSAFE, 28)),
        ],
        [
            lambda: j("AIza", rand(URLSAFE, 20)),
            lambda: j("AIza", "Sy", "-your-api-key-goes-here-xxxxxxx"),
            lambda: j("AIza", "0" * 35),
        ],
    ),
    "secrets/npm-token": (
        [lambda: with_crc("npm_")] * 3,
        [
            lambda: j("npm_", rand(ALNUM, 36)),  # checksum wrong
            lambda: j("npm_", "0" * 36),
            lambda: j("npm_", rand(ALNUM, 20)),
        ],
    ),
    "secrets/pypi-token": (
        [
            lambda: j("pypi-", "AgEIcHlwaS5vcmc", rand(URLSAFE, 150)),
            lambda: j("pypi-", "AgENdGVzdC5weXBpLm9yZw", rand(URLSAFE, 120)),
            lambda: j("pypi-", "AgEIcHlwaS5vcmc", rand(URLSAFE, 60)),
        ],
        [
            lambda: j("pypi-", "AgEIcHlwaS5vcmc", rand(URLSAFE, 10)),
            lambda: j("pypi-", rand(URLSAFE, 150)),  # not a pypi.org macaroon
            lambda: j("pypi-", "AgEIcHlwaS5vcmc", "x" * 80),
        ],
    ),
    "secrets/twilio-key": (
        [lambda: j("SK", rand(HEX, 32))] * 3,
        [
            lambda: j("SK", rand(HEX, 20)),
            lambda: j("TASK", rand(HEX, 32)),
            lambda: j("SK", "0" * 32),
        ],
    ),
    "secrets/sendgrid-key": (
        [lambda: j("SG.", rand(URLSAFE, 22), ".", rand(URLSAFE, 43))] * 3,
        [
            lambda: j("SG.", rand(URLSAFE, 10), ".", rand(URLSAFE, 43)),
            lambda: j("SG.", "x" * 22, ".", "x" * 43),
            lambda: j("XSG.", rand(URLSAFE, 22), ".", rand(URLSAFE, 43)),
        ],
    ),
    "secrets/azure-storage-key": (
        [
            lambda: j(
                "DefaultEndpointsProtocol=https;AccountName=",
                rand(string.ascii_lowercase, 10),
                ";Account",
                "Key=",
                rand(ALNUM + "+/", 86),
                "==",
            ),
            lambda: j("Account", "Key=", rand(ALNUM + "+/", 86), "=="),
            lambda: j("account", "key = ", rand(ALNUM + "+/", 86), "=="),
        ],
        [
            lambda: j("Account", "Key=", rand(ALNUM, 20), "=="),
            lambda: j("Account", "Key=", "A" * 86, "=="),
            lambda: j("AccountName=", rand(ALNUM + "+/", 86), "=="),
        ],
    ),
    "secrets/jwt": (
        [
            lambda: jwt({"sub": rand(ALNUM, 8), "exp": FUTURE}),
            lambda: jwt({"sub": rand(ALNUM, 8), "name": "A User"}),
            lambda: jwt({"iss": "svc", "sub": rand(ALNUM, 12)}, {"alg": "RS256", "kid": rand(ALNUM, 8)}),
        ],
        [
            lambda: ".".join(
                ["eyJ" + rand(ALNUM, 20), "eyJ" + rand(ALNUM, 20), rand(URLSAFE, 43)]
            ),  # not JSON
            lambda: jwt({"sub": "x"}).rsplit(".", 1)[0],  # no signature part
            lambda: ".".join(
                ["eyJub3RoaW5nIjoxfQ", "eyJzdWIiOiJ4In0", rand(URLSAFE, 43)]
            ),  # header without alg
        ],
    ),
    "secrets/url-password": (
        [
            lambda: j("postgresql://app:", rand(ALNUM, 16), "@db.internal.corp:5432/app"),
            lambda: j("redis://:", rand(ALNUM, 20), "@cache.prod.net:6379/0"),
            lambda: j("https://deploy:", rand(ALNUM, 12), "@registry.company.io/v2/"),
        ],
        [
            lambda: "postgresql://postgres:postgres@db.internal/app",  # a default, not a secret
            lambda: j("postgresql://app:", rand(ALNUM, 16), "@localhost:5432/app"),  # a laptop's database
            lambda: "postgresql://user:${DB_PASSWORD}@db.internal/app",
        ],
    ),
}


def _cases(positive: bool) -> list[tuple[str, int]]:
    return [
        (rule, index) for rule, (pos, neg) in RULES.items() for index in range(len(pos if positive else neg))
    ]


def test_every_rule_has_a_table_entry_with_three_of_each() -> None:
    assert set(RULES) == {rule.rule for rule in TOKEN_RULES}
    for rule, (positives, negatives) in RULES.items():
        assert len(positives) >= 3 and len(negatives) >= 3, rule


@pytest.mark.parametrize(("rule", "index"), _cases(True))
def test_positives(rule: str, index: int) -> None:
    secret = RULES[rule][0][index]()
    hits = scan_lines("app/settings.py", {3: f'VALUE = "{secret}"'})
    assert [(h.rule, h.line) for h in hits] == [(rule, 3)], secret
    assert hits[0].value in secret


@pytest.mark.parametrize(("rule", "index"), _cases(False))
def test_negatives(rule: str, index: int) -> None:
    sample = RULES[rule][1][index]()
    assert [h.rule for h in scan_lines("app/settings.py", {1: f"VALUE = {sample!r}"})] == []


@pytest.mark.parametrize(
    "text",
    [
        j("commit = ", rand(HEX, 40)),  # a git sha
        j("request_token = '", "123e4567-e89b-12d3-a456-426614174000", "'"),  # a UUID
        j('"integrity": "sha512-', rand(ALNUM + "+/", 86), '=="'),  # a lock-file hash
        j("resolved_hash = 'sha256:", rand(HEX, 64), "'"),
        j("version_token = '", rand(HEX, 40), "'"),
    ],
)
def test_hashes_and_ids_are_not_secrets(text: str) -> None:
    assert scan_lines("app/x.py", {1: text}) == []


async def test_severity_in_code_tests_and_docs() -> None:
    live = j("sk_", "live_", rand(ALNUM, 24))
    test_mode = j("sk_", "test_", rand(ALNUM, 24))
    expired = jwt({"sub": "x", "exp": 1_000_000_000})
    cases = [
        ("app/billing.py", live, Severity.BLOCKER, "revoke"),
        ("app/billing.py", test_mode, Severity.CONCERN, "test-mode"),
        ("app/auth.py", expired, Severity.CONCERN, "expired"),
        ("tests/test_billing.py", live, Severity.CONCERN, "test fixture or documentation"),
        ("docs/usage.rst", live, Severity.CONCERN, "deliberately public example"),
        ("examples/client.py", live, Severity.CONCERN, "deliberately public example"),
    ]
    for path, secret, severity, words in cases:
        output = await run(SecretsAnalyzer(), under_review(path, None, f'KEY = "{secret}"\n'))
        [found] = output.findings
        assert (path, found.severity) == (path, severity)
        assert words in found.message
        assert secret not in found.message and secret[6:14] not in found.message


async def test_a_test_private_key_is_a_concern_that_says_why(private_key_pem: str) -> None:
    output = await run(SecretsAnalyzer(), under_review("tests/keys/testkey_rsa.pem", None, private_key_pem))
    [found] = output.findings
    assert found.rule == "secrets/private-key" and found.severity is Severity.CONCERN
    assert "never live" in found.message


def test_redact_secrets_replaces_every_value_and_nothing_else(private_key_pem: str) -> None:
    github = with_crc("ghp_")
    stripe = j("sk_", "live_", rand(ALNUM, 30))
    password = rand(ALNUM, 18)
    generic = rand(ALNUM, 28)
    text = "\n".join(
        [
            "Deploy notes:",
            f"export GITHUB_TOKEN={github}",
            f"stripe.api_key = '{stripe}'",
            f"DATABASE_URL=postgresql://app:{password}@db.prod.corp/app",
            f'CLIENT_SECRET = "{generic}"',
            private_key_pem.strip(),
            "commit 0123456789abcdef0123456789abcdef01234567 is fine",
        ]
    )
    redacted = redact_secrets(text)
    for value in (github, stripe, password, generic, private_key_pem.strip().split("\n")[1]):
        assert value not in redacted
    assert redacted.split("\n") == [
        "Deploy notes:",
        "export GITHUB_TOKEN=[REDACTED:secrets/github-token]",
        "stripe.api_key = '[REDACTED:secrets/stripe-key]'",
        "DATABASE_URL=postgresql://app:[REDACTED:secrets/url-password]@db.prod.corp/app",
        'CLIENT_SECRET = "[REDACTED:secrets/generic]"',
        "[REDACTED:secrets/private-key]",
        "commit 0123456789abcdef0123456789abcdef01234567 is fine",
    ]
    assert redact_secrets("nothing to hide\n") == "nothing to hide\n"


def test_checksum_matches_githubs_own_scheme() -> None:
    # The CRC32 of the 30 random characters, in base62, left-padded to six.
    assert base62_crc32("") == "000000"
    assert len(base62_crc32(rand(ALNUM, 30))) == 6
    body = rand(ALNUM, 30)
    token = j("ghp_", body, base62_crc32(body))
    assert [h.rule for h in scan_lines("a.py", {1: token})] == ["secrets/github-token"]
    broken = token[:-1] + ("A" if token[-1] != "A" else "B")
    assert scan_lines("a.py", {1: broken}) == []


@pytest.mark.parametrize("rule", ["secrets/url-password", "secrets/azure-storage-key"])
async def test_a_secret_without_a_public_prefix_shows_none_of_itself(rule: str) -> None:
    sample = RULES[rule][0][0]()
    output = await run(SecretsAnalyzer(), under_review("app/settings.py", None, f'VALUE = "{sample}"\n'))
    [found] = output.findings
    assert found.message.split("(`")[1].startswith("\u2026`)")  # the preview is the ellipsis alone
    assert sample not in found.message


# --- test servers' keys and docstring examples (urllib3's history) ----------------------------


@pytest.mark.parametrize(
    ("path", "example"),
    [
        ("dummyserver/certs/client_password.key", True),  # urllib3's test server
        ("tests/fake_api/key.pem", True),
        ("mocks/server.key", True),
        ("deploy/key.pem", False),
        ("src/dummy.py", False),  # a file name, not a directory of stand-ins
    ],
)
def test_a_test_servers_keys_are_examples(path: str, example: bool) -> None:
    from app.review.analyzers.secrets import is_example_path

    assert is_example_path(path) is example


BUILDER = [  # urllib3's vendored rfc3986 builder.py, around line 287
    "        Example:",
    "",
    "            >>> URIBuilder().add_scheme('https').add_host('github.com'",
    "            ...     ).add_path('sigmavirus24/rfc3986').add_credentials(",
    "            ...     'sigmavirus24', 'not-re@l').finalize().unsplit()",
    "            'https://sigmavirus24:not-re%40l@github.com/sigmavirus24/rfc3986'",
    "",
    "        connect('https://user:hunter2x@example.com')",
]


@pytest.mark.parametrize(("line", "doctest"), [(5, True), (6, True), (8, False), (1, False)])
def test_a_docstring_example_is_documentation(line: int, doctest: bool) -> None:
    from app.review.analyzers.secrets import is_doctest_line

    assert is_doctest_line("src/urllib3/packages/rfc3986/builder.py", BUILDER, line) is doctest
    assert not is_doctest_line("README.txt", BUILDER, line)


async def test_urllib3s_doctest_password_and_test_server_key_are_concerns() -> None:
    from app.review.core.model import Severity
    from app.review.engine.builtin import BuiltinReviewer
    from tests.test_review_analyzers import changed
    from tests.test_review_engine import RecordingReader, pull

    doc = 'def build():\n    """\n' + "\n".join(BUILDER[:6]) + '\n    """\n'
    key = (
        "-----BEGIN RSA PRIVATE KEY-----\n" + "MIIEowIBAAKCAQEAx0a" * 3 + "\n-----END RSA PRIVATE KEY-----\n"
    )
    files = {"src/pkg/builder.py": doc, "dummyserver/certs/server.key": key}
    result = await BuiltinReviewer().review(
        pull([changed(p, None, t) for p, t in files.items()], RecordingReader(files))
    )
    secrets = {(f.path, f.rule, f.severity) for f in result.findings if f.rule.startswith("secrets/")}
    assert secrets == {
        ("src/pkg/builder.py", "secrets/url-password", Severity.CONCERN),
        ("dummyserver/certs/server.key", "secrets/private-key", Severity.CONCERN),
    }


async def test_a_key_with_a_format_is_no_docstring_example() -> None:
    """The hostile fork: a real-format token under a ``>>>`` line stays a blocker."""
    from app.review.core.model import Severity
    from app.review.engine.builtin import BuiltinReviewer
    from tests.test_review_analyzers import changed
    from tests.test_review_engine import RecordingReader, pull

    key = (
        "    -----BEGIN RSA PRIVATE KEY-----\n"
        + "    MIIEowIBAAKCAQEAx0a\n" * 3
        + "    -----END RSA PRIVATE KEY-----\n"
    )
    doc = 'def connect():\n    """\n    >>> print(key())\n' + key + '    """\n'
    result = await BuiltinReviewer().review(
        pull([changed("src/pkg/client.py", None, doc)], RecordingReader({"src/pkg/client.py": doc}))
    )
    found = [(f.rule, f.severity) for f in result.findings if f.rule.startswith("secrets/")]
    assert found and all(severity is Severity.BLOCKER for _, severity in found), found
