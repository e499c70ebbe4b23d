"""Credentials in added lines: private keys, AWS access key ids, GitHub and Slack tokens, and
high-entropy values assigned to names that say "secret" (``*_TOKEN = "..."``).

Every finding is a blocker. A message never repeats the secret: it shows at most its first four
characters and the kind of credential. Tuned against false positives: placeholders, values read
from the environment, templating, UUIDs, documentation and tests (for the generic rule).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from ..model import ChangedFile, Finding, Severity
from . import AnalysisInput, AnalyzerOutput, finding, is_test_path

__all__ = ["SecretHit", "SecretsAnalyzer", "redact", "redact_secrets", "scan_lines", "shannon_entropy"]

MIN_GENERIC_LENGTH = 16
MIN_GENERIC_ENTROPY = 3.5
MIN_TOKEN_ENTROPY = 3.0  # a real token's random part is far above this; "ghp_000…" is not

_PRIVATE_KEY = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)?-----")
_ARMOR_HEADER = re.compile(r"^[A-Za-z][A-Za-z0-9-]*:\s")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
_AWS = re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")
_GITHUB = re.compile(
    r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{82})(?![A-Za-z0-9_])"
)
_SLACK = re.compile(r"(?<![A-Za-z0-9])xox[abposr]-(?:\d+-)+[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*")

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
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_DOC_SUFFIXES = (".md", ".markdown", ".rst", ".txt", ".adoc")
_YAML_SUFFIXES = (".yml", ".yaml")


@dataclass(frozen=True, slots=True)
class SecretHit:
    line: int
    rule: str
    kind: str
    value: str  # the matched secret: used for the redacted preview, never put in a message


def shannon_entropy(value: str) -> float:
    if not value:
        return 0.0
    counts = Counter(value)
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


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
    if _UUID.match(value):
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
        kind = (match.group(1) or "").strip()
        yield SecretHit(number, "secrets/private-key", f"{kind} private key".strip(), match.group(0))
    for found in _AWS.finditer(text):
        token = found.group(0)
        if "EXAMPLE" not in token and not _same_char(token[4:]) and shannon_entropy(token[4:]) >= 2.5:
            yield SecretHit(number, "secrets/aws-access-key", "AWS access key id", token)
    for found in _GITHUB.finditer(text):
        token = found.group(0)
        body = token.split("_", 1)[1] if token.startswith("gh") else token[len("github_pat_") :]
        if not _same_char(body) and shannon_entropy(body) >= MIN_TOKEN_ENTROPY:
            yield SecretHit(number, "secrets/github-token", "GitHub token", token)
    for found in _SLACK.finditer(text):
        token = found.group(0)
        body = token[5:]
        if len(token) >= 24 and shannon_entropy(body) >= MIN_TOKEN_ENTROPY:
            yield SecretHit(number, "secrets/slack-token", "Slack token", token)


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


REDACTED = "[redacted]"
_PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)


def redact_secrets(text: str) -> str:
    """``text`` with every value the scanner recognises replaced by ``[redacted]`` (private key
    blocks whole), for text that leaves the bot: what is sent to a language model, what it says.
    Errs towards redacting: the generic rule applies to every path here, tests and docs too."""
    text = _PRIVATE_KEY_BLOCK.sub("[redacted private key]", text)
    lines = text.split("\n")
    for index, line in enumerate(lines):
        hits = [*_token_hits(0, line), *_generic_hits("", 0, line)]
        for hit in hits:
            line = line.replace(hit.value, REDACTED)
        lines[index] = line
    return "\n".join(lines)


def _message(hit: SecretHit) -> str:
    # A known token format shows its (public) prefix; a free-form value shows less of itself.
    preview = redact(hit.value, 4 if hit.rule != "secrets/generic" else len(hit.value) // 8)
    return (
        f"Possible {hit.kind} committed (`{preview}`): remove it and revoke or rotate it, "
        "since it stays in the branch history."
    )


class SecretsAnalyzer:
    name = "secrets"

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        return []

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        findings: list[Finding] = []
        for item in batch.files:
            for hit in scan_lines(item.path, item.lines.added_text):
                findings.append(
                    finding(
                        item.path,
                        hit.line,
                        Severity.BLOCKER,
                        hit.rule,
                        _message(hit),
                        item.lines.added_text[hit.line],
                    )
                )
        return AnalyzerOutput(findings=findings)
