"""Startup settings: a missing or malformed one exits 2 with one line naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.settings.config import ConfigError, default_graphql_url, load_settings

ROOT = Path(__file__).resolve().parents[1]


def base_env(pem: str) -> dict[str, str]:
    return {"APP_ID": "12345", "PRIVATE_KEY": pem, "WEBHOOK_SECRET": "s3cret"}


def run_serve(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"APP_ID", "PRIVATE_KEY", "WEBHOOK_SECRET"}}
    return subprocess.run(
        [sys.executable, "-m", "app", "serve"],
        env={**clean, **env, "PORT": "1"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("change", "setting", "says"),
    [
        ({"APP_ID": None}, "APP_ID", "is required but not set"),
        ({"APP_ID": "twelve"}, "APP_ID", "valid integer"),
        ({"WEBHOOK_SECRET": None}, "WEBHOOK_SECRET", "is required but not set"),
        ({"WEBHOOK_SECRET": "  "}, "WEBHOOK_SECRET", "must not be empty"),
        (
            {"PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----\nnope\n-----END RSA PRIVATE KEY-----"},
            "PRIVATE_KEY",
            "not a PEM",
        ),
        ({"PRIVATE_KEY": None}, "PRIVATE_KEY", "PRIVATE_KEY or PRIVATE_KEY_PATH must be set"),
        (
            {"PRIVATE_KEY": None, "PRIVATE_KEY_PATH": "/nonexistent/key.pem"},
            "PRIVATE_KEY_PATH",
            "cannot read",
        ),
        ({"DATABASE_URL": "mysql://db/x"}, "DATABASE_URL", "expected a postgres"),
        ({"REVIEW_APPROVE": "perhaps"}, "REVIEW_APPROVE", "valid boolean"),
        ({"PORT": "0"}, "PORT", "greater than or equal to 1"),
        ({"GITHUB_API_URL": "ftp://ghe"}, "GITHUB_API_URL", "http(s) URL"),
        ({"REVIEWER": "llm"}, "LLM_MODEL", "is required with REVIEWER=llm"),
        ({"REVIEWER": "llm", "LLM_MODEL": "gpt-x"}, "LLM_API_KEY", "is required with REVIEWER=llm"),
        (
            {
                "REVIEWER": "llm",
                "LLM_MODEL": "claude-x",
                "LLM_PROVIDER": "anthropic",
                "LLM_BASE_URL": "http://h",
            },
            "LLM_API_KEY",
            "for Anthropic",
        ),
        ({"REVIEWER": "llm", "LLM_PROVIDER": "mistral"}, "LLM_PROVIDER", "'openai' or 'anthropic'"),
        ({"REVIEWER": "llm", "LLM_BASE_URL": "localhost:11434"}, "LLM_BASE_URL", "http(s) URL"),
        ({"REVIEWER": "gpt"}, "REVIEWER", "Input should be 'builtin' or 'llm'"),
    ],
)
def test_a_bad_setting_is_named_in_the_error(
    private_key_pem: str, change: dict[str, str | None], setting: str, says: str
) -> None:
    env = {**base_env(private_key_pem), **{k: v for k, v in change.items() if v is not None}}
    for key, value in change.items():
        if value is None:
            env.pop(key, None)
    with pytest.raises(ConfigError) as caught:
        load_settings(env)
    assert caught.value.setting == setting
    assert says in caught.value.problem


@pytest.mark.slow
def test_serve_exits_2_with_one_line_naming_the_setting(private_key_pem: str) -> None:
    env = base_env(private_key_pem)
    env["WEBHOOK_SECRET"] = ""
    result = run_serve(env)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "revbot: configuration error: WEBHOOK_SECRET: "
        "must not be empty: the server never accepts unsigned deliveries"
    ]
    assert private_key_pem.splitlines()[1] not in result.stderr


@pytest.mark.slow
def test_serve_refuses_a_key_file_that_is_not_rsa(tmp_path: Path, private_key_pem: str) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key_file = tmp_path / "key.pem"
    key_file.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    env = base_env(private_key_pem)
    del env["PRIVATE_KEY"]
    env["PRIVATE_KEY_PATH"] = str(key_file)
    result = run_serve(env)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "revbot: configuration error: PRIVATE_KEY_PATH: "
        "the PEM holds a private key that is not RSA (GitHub Apps sign with RS256)"
    )


def test_defaults_and_escaped_newlines(private_key_pem: str) -> None:
    env = base_env(private_key_pem.replace("\n", "\\n"))
    settings, pem = load_settings(env)
    assert pem.startswith("-----BEGIN PRIVATE KEY-----\n")
    assert settings.github_api_url == "https://api.github.com"
    assert settings.graphql_url == "https://api.github.com/graphql"
    assert settings.sqlalchemy_url == "sqlite+aiosqlite:///data/revbot.sqlite3"
    assert (settings.host, settings.port, settings.webhook_path) == ("0.0.0.0", 3000, "/api/github/webhooks")
    assert (settings.review_approve, settings.reviewer, settings.log_level) == (True, "builtin", "info")
    assert "s3cret" not in repr(settings)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"DATABASE_URL": "postgres://u:p@db:5432/x"}, "postgresql+asyncpg://u:p@db:5432/x"),
        ({"DATABASE_URL": "postgresql://u:p@db/x"}, "postgresql+asyncpg://u:p@db/x"),
        ({"DATABASE_URL": "sqlite:///tmp/x.db"}, "sqlite+aiosqlite:///tmp/x.db"),
    ],
)
def test_database_urls_as_operators_paste_them(
    private_key_pem: str, env: dict[str, str], expected: str
) -> None:
    settings, _ = load_settings({**base_env(private_key_pem), **env})
    assert settings.sqlalchemy_url == expected


@pytest.mark.parametrize(
    ("api", "graphql"),
    [
        ("https://api.github.com", "https://api.github.com/graphql"),
        ("https://ghe.example.com/api/v3", "https://ghe.example.com/api/graphql"),
        ("https://ghe.example.com/api/v3/", "https://ghe.example.com/api/graphql"),
    ],
)
def test_graphql_url_follows_the_rest_base(api: str, graphql: str) -> None:
    assert default_graphql_url(api) == graphql


def test_an_explicit_graphql_url_wins(private_key_pem: str) -> None:
    env = {
        **base_env(private_key_pem),
        "GITHUB_API_URL": "https://ghe/api/v3",
        "GITHUB_GRAPHQL_URL": "https://gql/x",
    }
    settings, _ = load_settings(env)
    assert settings.graphql_url == "https://gql/x"
