"""Credentials in added lines, and ``redact_secrets`` for anything about to leave the machine.

Known formats (their table is ``secret_tokens``), each with its prefix and, where the format has
one, its checksum or structure: private keys (every PEM kind, OpenSSH, PGP, PuTTY), AWS access
key ids, GitHub tokens (CRC32 checksum), GitLab, Slack tokens and webhook URLs, Stripe, OpenAI,
Anthropic, Google API keys and OAuth client secrets, npm (CRC32 checksum), PyPI, Twilio, SendGrid,
Azure storage account keys, JWTs (header and payload must decode), passwords inside URLs; and
high-entropy values assigned to names that say "secret" (``*_TOKEN = "..."``).

A live credential is a blocker. One in a test fixture or a documentation example is a concern that
says why it may be fine (deliberately public example keys are common there); so are a Stripe
test-mode key and an expired JWT. A message never repeats the secret: it shows at most its first
four characters and the kind of credential. Tuned against false positives: placeholders, values
read from the environment, templating, UUIDs, git SHAs, lock-file hashes, documentation and tests
(for the generic rule), local development URLs.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from ..core.model import ChangedFile, Finding, Severity
from .base import AnalysisInput, AnalyzerOutput, Rule, finding, is_test_path
from .secret_tokens import TOKEN_KINDS, TOKEN_RULES, shannon_entropy

__all__ = ["SecretHit", "SecretsAnalyzer", "redact", "redact_secrets", "scan_lines"]

MIN_GENERIC_LENGTH = 16
MIN_GENERIC_ENTROPY = 3.5

_PRIVATE_KEY = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d+: "
)
_PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)"
    r"|PuTTY-User-Key-File-\d+: .*?(?:Private-MAC: \S+|\Z)",
    re.DOTALL,
)
_ARMOR_HEADER = re.compile(r"^[A-Za-z][A-Za-z0-9-]*:\s")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
_LOCAL_HOSTS = re.compile(
    r"^(?:localhost|127\.\d+\.\d+\.\d+|0\.0\.0\.0|\[?::1\]?|[\w.-]*\.(?:local|localhost|test|example|invalid)"
    r"|(?:[\w-]+\.)*example\.(?:com|org|net))$",
    re.IGNORECASE,
)
_SEPARATOR = r"\s*(?:=>|:=|(?<![=!<>])=(?!=)|:)\s*"
_ASSIGNMENT = re.compile(
    r"""(?<![A-Za-z0-9_.-])(?P<nq>["']?)(?P<name>[A-Za-z_][A-Za-z0-9_.-]*+)(?P=nq)"""
    r"""(?:\s*:\s*[A-Za-z_][\w\[\]., |]*?)?"""  # a type annotation: API_TOKEN: str = "..."
    + _SEPARATOR
    + r"""[rbuRBU]{0,2}(?:"(?P<v1>[^"\n]*)"|'(?P<v2>[^'\n]*)'|`(?P<v3>[^`\n]*)`)"""
)
_ENV_ASSIGNMENT = re.compile(
    r"^\s*(?:export\s+)?(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(?P<value>[^\s\"'#`][^\s#]*)\s*(?:#.*)?$"
)
_YAML_ASSIGNMENT = re.compile(
    r"^\s*(?:-\s+)?(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)\s*[:=]\s*(?P<value>[^\s\"'#`{\[|>&*!][^\s#]*)\s*(?:#.*)?$"
)
_SECRET_NAMES = (
    "secret",
    "token",
    "password",
    "passwd",
    "pwd",
    "api_key",
    "apikey",
    "access_key",
    "secret_key",
    "private_key",
    "auth_key",
    "client_secret",
)
_PLACEHOLDER_WORDS = (
    "changeme",
    "change_me",
    "change-me",
    "example",
    "dummy",
    "test",
    "fake",
    "sample",
    "placeholder",
    "your",
    "redacted",
    "insecure",
    "xxx",
    "***",
    "...",
    "\u2026",
    "todo",
    "replace",
    "secret",
    "password",
    "token",
)
_FROM_ELSEWHERE = ("os.environ", "getenv", "process.env", "env(", "environ[", "ENV[", "secrets.", "vault")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
# git SHAs, sha256 digests, lock-file hashes
_DIGEST = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64}|(?:sha(?:1|256|384|512)|md5)[:-].+)$")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_DOC_SUFFIXES = (".md", ".markdown", ".rst", ".txt", ".adoc")
_YAML_SUFFIXES = (".yml", ".yaml")


@dataclass(frozen=True, slots=True)
class SecretHit:
    line: int
    rule: str
    kind: str
    value: str  # the matched secret: used for the redacted preview, never put in a message
    severity: Severity = Severity.BLOCKER  # in code; a test fixture or a doc makes it a concern


def secret_digest(value: str) -> str:
    """What identifies a secret in a finding's key: a digest, never the secret."""
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def redact(value: str, keep: int = 4) -> str:
    """At most ``keep`` leading characters and an ellipsis: enough to recognise, not to use."""
    return value[: max(0, min(keep, len(value) // 4))] + "\u2026"


def _same_char(value: str) -> bool:
    return len(set(value)) <= 1


def _is_env_file(path: str) -> bool:
    name = PurePosixPath(path).name
    return name == ".env" or name.startswith(".env.") or name.endswith(".env")


def _secret_name(name: str) -> bool:
    snake = _CAMEL.sub("_", name).lower().replace("-", "_").replace(".", "_")
    return any(snake == suffix or snake.endswith("_" + suffix) for suffix in _SECRET_NAMES)


def _plausible_secret_value(value: str) -> bool:
    if len(value) < MIN_GENERIC_LENGTH or any(ch.isspace() for ch in value) or _same_char(value):
        return False
    lowered = value.lower()
    if any(word in lowered for word in _PLACEHOLDER_WORDS):
        return False
    if value.startswith(("$", "%", "<", "/", "./", "~/", "http://", "https://", "file:")):
        return False
    if ("{" in value and "}" in value) or ("<" in value and ">" in value) or "%(" in value or "%s" in value:
        return False
    if _UUID.match(value) or _DIGEST.match(value):
        return False
    classes = sum(
        (any(c.islower() for c in value), any(c.isupper() for c in value), any(c.isdigit() for c in value))
    )
    if classes < 2:  # lowercase words, CONSTANT_NAMES, long numbers
        return False
    return shannon_entropy(value) >= MIN_GENERIC_ENTROPY


def _key_material_follows(rest: str, following: Sequence[str]) -> bool:
    """A private key header is a finding when key material comes with it, not when code merely
    mentions the header (``if pem.startswith("-----BEGIN RSA PRIVATE KEY-----")``)."""
    same_line = re.sub(r"\\r|\\n|[\"'`,;+()\s]", "", rest)
    if _BASE64_RUN.match(same_line):
        return True
    for text in following:
        stripped = re.sub(r"\\r|\\n|[\"'`,;+\s]", "", text)
        if not stripped or _ARMOR_HEADER.match(text.strip().strip("\"'")):
            continue  # blank lines and armour headers (Proc-Type:, Version:, ...)
        return _BASE64_RUN.match(stripped) is not None
    return False


def _token_hits(number: int, text: str) -> Iterator[SecretHit]:
    match = _PRIVATE_KEY.search(text)
    if match:
        kind = "PuTTY" if match.group(0).startswith("PuTTY") else (match.group(1) or "").strip()
        yield SecretHit(number, "secrets/private-key", f"{kind} private key".strip(), match.group(0))
    for rule in TOKEN_RULES:
        for found in rule.pattern.finditer(text):
            host = found.groupdict().get("host")
            if host is not None and _LOCAL_HOSTS.match(host.rsplit(":", 1)[0] if "]" not in host else host):
                continue  # a development database on this machine
            value = found.group("value") if "value" in rule.pattern.groupindex else found.group(0)
            verdict = rule.verdict(value)
            if verdict is not None:
                yield SecretHit(number, rule.rule, verdict[0], value, verdict[1])


def _generic_hits(path: str, number: int, text: str) -> Iterator[SecretHit]:
    if any(marker in text for marker in _FROM_ELSEWHERE):
        return
    candidates: list[tuple[str, str]] = []
    for match in _ASSIGNMENT.finditer(text):
        value = next(v for v in (match.group("v1"), match.group("v2"), match.group("v3")) if v is not None)
        candidates.append((match.group("name"), value))
    if not candidates and (_is_env_file(path) or path.endswith(_YAML_SUFFIXES)):
        pattern = _ENV_ASSIGNMENT if _is_env_file(path) else _YAML_ASSIGNMENT
        line_match = pattern.match(text)
        if line_match:
            candidates.append((line_match.group("name"), line_match.group("value")))
    for name, value in candidates:
        if _secret_name(name) and _plausible_secret_value(value):
            yield SecretHit(number, "secrets/generic", f"secret assigned to `{name}`", value)
            return


_STAND_IN = ("dummy", "fake", "mock")  # a directory of stand-ins: dummyserver/, fake_api/, mocks/
_EXAMPLE_DIRS = frozenset(
    {
        "docs",
        "doc",
        "documentation",
        "examples",
        "example",
        "samples",
        "sample",
        "fixtures",
        "testdata",
        "test_data",
    }
)


def is_example_path(path: str) -> bool:
    """Tests, fixtures and documentation: where deliberately public example keys live (a test
    server's directory too: urllib3's ``dummyserver/certs/``)."""
    parts = PurePosixPath(path).parts
    return (
        is_test_path(path)
        or path.lower().endswith(_DOC_SUFFIXES)
        or any(part.lower() in _EXAMPLE_DIRS or part.lower().startswith(_STAND_IN) for part in parts[:-1])
    )


# What a docstring example may show without being a leak: a password in an example URL, a value
# assigned to a secret-looking name. A key in a format with a prefix or a checksum (a private key
# block, an AWS or GitHub token) is no example wherever it stands: a PR could otherwise put a real
# one under a ``>>>`` line and pass the check.
DOCTEST_RULES = frozenset({"secrets/url-password", "secrets/generic"})


def is_doctest_line(path: str, rows: Sequence[str], line: int) -> bool:
    """A line of a Python docstring's example: a ``>>>`` line, its ``...`` continuation or the
    output shown under it (up to the next blank line). What it shows is documentation, as a
    README is. ``rows``: the file at head (row ``n`` is ``rows[n - 1]``)."""
    if not path.endswith(".py"):
        return False
    for number in range(min(line, len(rows)), 0, -1):
        text = rows[number - 1].strip()
        if not text:
            return False
        if text.startswith((">>> ", "... ")) or text in (">>>", "..."):
            return True
    return False


def scan_lines(path: str, added: Mapping[int, str]) -> list[SecretHit]:
    """Secrets in a file's added lines (head line number -> text)."""
    hits: list[SecretHit] = []
    generic_allowed = not is_test_path(path) and not path.lower().endswith(_DOC_SUFFIXES)
    for number in sorted(added):
        text = added[number]
        found = list(_token_hits(number, text))
        found = [
            hit
            for hit in found
            if hit.rule != "secrets/private-key"
            or _key_material_follows(
                text[text.index(hit.value) + len(hit.value) :],
                [added[n] for n in range(number + 1, number + 8) if n in added],
            )
        ]
        if not found and generic_allowed:
            found = list(_generic_hits(path, number, text))
        seen: set[str] = set()
        for hit in found:
            if hit.rule not in seen:  # one finding per rule and line
                seen.add(hit.rule)
                hits.append(hit)
    return hits


# Formats whose first characters are already secret (no public prefix to show).
_NO_PUBLIC_PREFIX = frozenset({"secrets/url-password", "secrets/azure-storage-key"})


def _message(hit: SecretHit, *, example: bool) -> str:
    # A known token format shows its (public) prefix; a free-form value shows less of itself.
    keep = 0 if hit.rule in _NO_PUBLIC_PREFIX else 4 if hit.rule != "secrets/generic" else len(hit.value) // 8
    preview = redact(hit.value, keep)
    if example:
        return (
            f"Possible {hit.kind} (`{preview}`) in a test fixture or documentation: fine if it is a "
            "deliberately public example that was never live; otherwise remove it and revoke or rotate it."
        )
    if hit.severity is not Severity.BLOCKER:
        return (
            f"Possible {hit.kind} committed (`{preview}`): probably not usable in production, "
            "but still a credential; prefer reading it from the environment."
        )
    return (
        f"Possible {hit.kind} committed (`{preview}`): remove it and revoke or rotate it, "
        "since it stays in the branch history."
    )


def redact_secrets(text: str) -> str:
    """``text`` with every secret the scanner recognises replaced by ``[REDACTED:<rule>]``: private
    key blocks whole, known token formats, passwords in URLs and secret-looking assignments.
    Everything else is left as it was. Pure; for text about to leave the machine."""
    text = _PRIVATE_KEY_BLOCK.sub("[REDACTED:secrets/private-key]", text)
    lines = text.split("\n")
    for index, line in enumerate(lines):
        hits = [h for h in _token_hits(0, line) if h.rule != "secrets/private-key"]
        hits += list(_generic_hits("", 0, line))
        for hit in sorted(hits, key=lambda h: -len(h.value)):
            line = line.replace(hit.value, f"[REDACTED:{hit.rule}]")
        lines[index] = line
    return "\n".join(lines)


class SecretsAnalyzer:
    name = "secrets"
    tools: tuple[str, ...] = ()
    differential: bool = False
    rules: tuple[Rule, ...] = (
        Rule("secrets/private-key", Severity.BLOCKER, "a private key block (a concern in tests and docs)"),
        *(
            Rule(token.rule, Severity.BLOCKER, f"{TOKEN_KINDS[token.rule]} (a concern in tests and docs)")
            for token in TOKEN_RULES
        ),
        Rule(
            "secrets/generic", Severity.BLOCKER, "a random-looking value assigned to a secret-named variable"
        ),
    )

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        return []

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        findings: list[Finding] = []
        for item in batch.files:
            for hit in scan_lines(item.path, item.lines.added_text):
                example = is_example_path(item.path) or (
                    hit.rule in DOCTEST_RULES and is_doctest_line(item.path, item.rows, hit.line)
                )
                findings.append(
                    finding(
                        item.path,
                        hit.line,
                        Severity.CONCERN if example else hit.severity,
                        hit.rule,
                        _message(hit, example=example),
                        item.lines.added_text[hit.line],
                        evidence=secret_digest(hit.value),  # two secrets never share a key
                    )
                )
        return AnalyzerOutput(findings=findings)
