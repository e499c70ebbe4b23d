"""Settings from the environment, validated once at startup.

A deployment that is misconfigured should fail before it accepts a single delivery, with one line
that names the setting and says what is wrong (exit status 2). Secrets are held as
``SecretStr`` so they never appear in a repr or a log line.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from . import dburl
from .eventloop import EventLoop

DEFAULT_API_URL = "https://api.github.com"
MAX_BODY_BYTES = 25 * 1024 * 1024
# PostgreSQL connections per process at most (the shared pool, plus in a web process the ledger
# insert's own; app/store/connect.py splits them). Heroku's and Fly's small Postgres plans allow
# 20: a web and a worker process at 8 each leave 4 for psql, ``doctor`` and one-off dynos.
DEFAULT_POOL_SIZE = 8
# Heroku sends SIGKILL 30 s after SIGTERM; the HTTP drain and the worker's grace share this budget.
DEFAULT_SHUTDOWN_SECONDS = 20.0
MAX_HTTP_DRAIN_SECONDS = 5.0
DEFAULT_BODY_BUDGET_BYTES = 64 * 1024 * 1024  # request bodies in memory at once (two full-size ones fit)


class ConfigError(Exception):
    """A setting is missing or malformed; the message names it."""

    def __init__(self, setting: str, problem: str) -> None:
        super().__init__(f"{setting}: {problem}")
        self.setting = setting
        self.problem = problem


def _load_rsa_pem(pem: str, setting: str) -> str:
    """Return the PEM text when it holds an RSA private key, else raise ConfigError naming ``setting``."""
    text = pem.replace("\\n", "\n").strip() + "\n"
    problem = _rsa_pem_problem(text)
    if problem is not None:
        raise ConfigError(setting, problem)
    return text


@functools.lru_cache(maxsize=16)  # loading a private key checks it, which costs tens of milliseconds
def _rsa_pem_problem(text: str) -> str | None:
    try:
        key = load_pem_private_key(text.encode(), password=None)
    except (ValueError, TypeError) as exc:
        return f"not a PEM-encoded RSA private key ({type(exc).__name__})"
    if not isinstance(key, RSAPrivateKey):
        return "the PEM holds a private key that is not RSA (GitHub Apps sign with RS256)"
    return None


def default_graphql_url(api_url: str) -> str:
    """GitHub.com serves GraphQL at ``/graphql`` beside REST; GitHub Enterprise Server serves REST
    at ``/api/v3`` and GraphQL at ``/api/graphql``."""
    base = api_url.rstrip("/")
    if base.endswith("/api/v3"):
        return base.removesuffix("/v3") + "/graphql"
    return base + "/graphql"


def shutdown_budget(total: float) -> tuple[float, float]:
    """Split the shutdown window into (HTTP drain, worker grace): in-flight webhook requests
    need seconds at most (they only commit a row), running jobs get the rest."""
    drain = min(MAX_HTTP_DRAIN_SECONDS, total / 4)
    return drain, total - drain


def load_env_file(path: Path, environ: MutableMapping[str, str] | None = None) -> bool:
    """Load ``KEY=value`` lines from ``path`` (what ``setup`` writes) into the environment;
    variables already set win. False when there is no such file."""
    from dotenv import dotenv_values

    if not path.is_file():
        return False
    target = os.environ if environ is None else environ
    for key, value in dotenv_values(path).items():
        if value is not None and key not in target:
            target[key] = value
    return True


class LlmSettings(BaseSettings):
    """The language-model reviewer's settings (``REVIEWER=llm``; see app/review/llm/), on their
    own so ``python -m app eval`` can use them without the GitHub App's."""

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    llm_provider: Literal["openai", "anthropic"] = "openai"
    llm_base_url: str | None = None
    llm_api_key: SecretStr | None = None
    llm_model: str | None = None
    llm_structured_output: Literal["json_schema", "json"] = "json_schema"
    llm_max_input_tokens: int = Field(default=24_000, ge=1_000)
    llm_max_output_tokens: int = Field(default=4_096, ge=256)
    llm_concurrency: int = Field(default=4, ge=1, le=64)
    llm_max_tokens_per_review: int = Field(default=200_000, ge=1_000)
    llm_daily_token_budget: int = Field(default=5_000_000, ge=0)  # per installation; 0: no cap
    llm_pull_daily_token_budget: int = Field(default=1_000_000, ge=0)  # per pull request; 0: no cap
    llm_person_daily_token_budget: int = Field(default=2_000_000, ge=0)  # per person; 0: no cap
    llm_temperature: float | None = Field(default=None, ge=0, le=2)  # unset: the model's default
    llm_timeout_seconds: float = Field(default=120.0, gt=0)
    llm_max_retries: int = Field(default=4, ge=0, le=10)
    llm_price_input_per_mtok: float = Field(default=0.0, ge=0)  # USD per million tokens, for the footer
    llm_price_output_per_mtok: float = Field(default=0.0, ge=0)

    @field_validator("llm_base_url", "llm_api_key", "llm_model", "llm_temperature", mode="before")
    @classmethod
    def _blank_llm_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("llm_provider", "llm_structured_output", mode="before")
    @classmethod
    def _lower_choice(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("llm_base_url")
    @classmethod
    def _llm_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL")
        return value.rstrip("/") if value else value


class AnalysisSettings(BaseSettings):
    """The bounds of the process that analyses pull-request content (app/review/isolation/), on
    their own so ``python -m app review`` can use them without the GitHub App's settings."""

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    review_workers: int = Field(default=2, ge=1, le=32)  # analysis processes, reused across reviews
    review_deadline_seconds: float = Field(default=120.0, gt=0, le=3600)  # wall clock, one analysis
    review_cpu_seconds: int = Field(default=120, ge=1, le=3600)  # CPU, one analysis
    review_memory_mb: int = Field(default=1024, ge=256, le=65536)  # address space of the process
    review_file_size_mb: int = Field(default=64, ge=1, le=4096)  # largest file it may write
    review_open_files: int = Field(default=256, ge=64, le=65536)
    review_pattern_seconds: float = Field(default=2.0, gt=0, le=600)  # one config file's patterns
    review_budget_seconds: float = Field(default=30.0, gt=0, le=3600)  # child time, all of one review
    review_max_bytes: int = Field(
        default=64 * 1024 * 1024, ge=1024 * 1024
    )  # kept and handed to the children, one review
    review_niceness: int = Field(default=19, ge=0, le=19)  # children's nice, above the server's
    review_ruff_versions: Path | None = None  # where pinned ruff versions are installed; unset: none
    review_ruff_keep: int = Field(default=4, ge=1, le=100)  # pinned versions kept (least recent go)

    @field_validator("review_ruff_versions", mode="before")
    @classmethod
    def _blank_path_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value


class ReviewerSettings(LlmSettings, AnalysisSettings):
    """What decides the review a pull request gets, without the GitHub App's credentials: the
    engine, the approval policy, whose reviews are the bot's, where learnings are kept. The
    command line's ``review`` and ``eval`` review with exactly these (``load_reviewer_settings``)."""

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    database_url: str | None = None
    app_slug: str | None = None
    review_approve: bool = True
    reviewer: Literal["builtin", "llm"] = "builtin"

    @field_validator("database_url", "app_slug", mode="before")
    @classmethod
    def _blank_reviewer_setting_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value


class Settings(ReviewerSettings):
    """Every setting of a deployment, from the environment (docs/configuration.md lists
    them); ``load_settings`` checks them all and names the first that is wrong."""

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    app_id: int = Field(gt=0)
    private_key: SecretStr | None = None
    private_key_path: Path | None = None
    webhook_secret: SecretStr
    # The secret being rotated out: accepted beside WEBHOOK_SECRET until it is unset (one at a
    # time: a rotation needs the old and the new one, never more).
    webhook_secret_previous: SecretStr | None = None
    github_api_url: str = DEFAULT_API_URL
    # GitHub's GET answers kept for conditional requests (a 304 does not count against the rate
    # limit), in bytes for the whole process; 0 turns them off.
    github_cache_bytes: int = Field(default=32 * 1024 * 1024, ge=0)
    github_graphql_url: str | None = None
    decoy_login: str | None = None
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    host: str = "0.0.0.0"
    port: int = Field(default=3000, ge=1, le=65535)
    webhook_path: str = "/api/github/webhooks"
    database_pool_size: int = Field(default=DEFAULT_POOL_SIZE, ge=1, le=100)
    allow_ephemeral_sqlite: bool = False
    shutdown_timeout: float = Field(default=DEFAULT_SHUTDOWN_SECONDS, gt=0, le=3600)
    metrics_token: SecretStr | None = None
    metrics_public: bool = False  # /metrics without a token: closed unless opened on purpose
    github_client_secret: SecretStr | None = None  # written by setup, unused: known so it is masked
    # ``python -m app worker`` serves its own /metrics here (a separate process counts its own jobs)
    worker_metrics_port: int | None = Field(default=None, ge=1, le=65535)
    payload_retention_days: int = Field(default=30, ge=1, le=36500)
    webhook_proxy_url: str | None = None
    # Bounds against hostile or broken clients, health thresholds and the database at boot
    # (issue 9; documented in docs/configuration.md).
    http_max_connections: int = Field(default=512, ge=1)
    http_header_timeout: float = Field(default=10.0, gt=0)
    http_body_timeout: float = Field(default=30.0, gt=0)
    http_keepalive_timeout: float = Field(default=75.0, gt=0)
    http_body_budget_bytes: int = Field(default=DEFAULT_BODY_BUDGET_BYTES, ge=MAX_BODY_BYTES)
    http_body_budget_wait: float = Field(default=5.0, ge=0)
    health_worker_stall_seconds: float = Field(default=60.0, gt=0)
    health_queue_delay_seconds: float = Field(default=600.0, gt=0)
    database_startup_timeout: float = Field(default=30.0, ge=0)
    event_loop: EventLoop = EventLoop.AUTO
    # Commands answered per person per pull request, and per pull request, an hour (over them:
    # silence, not even a reaction); the share of each content-creating window kept for reviews.
    command_budget_per_person: int = Field(default=5, ge=1, le=1000)
    command_budget_per_pull: int = Field(default=20, ge=1, le=10_000)
    write_reserve_for_reviews: float = Field(default=0.25, ge=0.0, lt=1.0)
    # Readiness: events of one burst are looked at together, this long after the first (issue 21).
    readiness_settle_seconds: float = Field(default=5.0, gt=0, le=3600 * 24)

    @field_validator(
        "private_key",
        "private_key_path",
        "github_graphql_url",
        "decoy_login",
        "metrics_token",
        "webhook_proxy_url",
        "worker_metrics_port",
        "webhook_secret_previous",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("webhook_secret")
    @classmethod
    def _secret_not_empty(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().strip():
            raise ValueError("must not be empty: the server never accepts unsigned deliveries")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("github_api_url", "github_graphql_url", "webhook_proxy_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL")
        return value.rstrip("/") if value else value

    @field_validator("webhook_path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must start with '/'")
        return value

    @model_validator(mode="after")
    def _key_source(self) -> Settings:
        if self.private_key is None and self.private_key_path is None:
            raise ValueError("PRIVATE_KEY or PRIVATE_KEY_PATH must be set")
        return self

    @property
    def graphql_url(self) -> str:
        return self.github_graphql_url or default_graphql_url(self.github_api_url)

    @property
    def sqlalchemy_url(self) -> str:
        return dburl.sqlalchemy_url(self.database_url)

    def private_key_pem(self) -> str:
        """The App's RSA private key as PEM text, from PRIVATE_KEY or the file at PRIVATE_KEY_PATH."""
        if self.private_key is not None:
            return _load_rsa_pem(self.private_key.get_secret_value(), "PRIVATE_KEY")
        assert self.private_key_path is not None  # guaranteed by _key_source
        try:
            text = self.private_key_path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                "PRIVATE_KEY_PATH", f"cannot read {self.private_key_path}: {exc.strerror}"
            ) from None
        return _load_rsa_pem(text, "PRIVATE_KEY_PATH")

    @property
    def log_level_number(self) -> int:
        return int(logging.getLevelName(self.log_level.upper()))


Read = TypeVar("Read", bound=BaseSettings)


def _read(kind: type[Read], env: Mapping[str, str] | None) -> Read:
    """``kind`` from the process environment, or from ``env`` instead (tests, the demo)."""
    try:
        return kind() if env is None else kind.model_validate({k.lower(): v for k, v in env.items()})
    except ValidationError as exc:
        raise _first_problem(exc) from None


def load_llm_settings(env: Mapping[str, str] | None = None) -> LlmSettings:
    """Only the model reviewer's settings, checked as for ``REVIEWER=llm`` (``eval``)."""
    settings = _read(LlmSettings, env)
    check_llm_settings(settings)
    return settings


def load_reviewer_settings(env: Mapping[str, str] | None = None) -> ReviewerSettings:
    """The settings a review is made with (``review``, ``eval``), checked as ``serve`` checks them."""
    settings = _read(ReviewerSettings, env)
    if settings.reviewer == "llm":
        check_llm_settings(settings)
    return settings


def load_analysis_settings(env: Mapping[str, str] | None = None) -> AnalysisSettings:
    """Only the analysis bounds (``review``, ``eval``)."""
    return _read(AnalysisSettings, env)


def _problems(exc: ValidationError) -> list[ConfigError]:
    """Every setting the validation refused, in the order of the settings class."""
    found: list[ConfigError] = []
    for error in exc.errors():
        setting = str(error["loc"][0]).upper() if error["loc"] else "PRIVATE_KEY"
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "missing":
            message = "is required but not set"
        found.append(ConfigError(setting, message))
    return found


def _first_problem(exc: ValidationError) -> ConfigError:
    return _problems(exc)[0]


def setting_problems(env: Mapping[str, str] | None = None) -> list[ConfigError]:
    """Every problem with the settings at once (``doctor``: one run names them all); empty when
    ``load_settings`` would succeed."""
    try:
        load_settings(env)
    except ConfigError as first:
        try:
            Settings() if env is None else Settings.model_validate({k.lower(): v for k, v in env.items()})
        except ValidationError as exc:
            found = _problems(exc)
            environ = os.environ if env is None else {k.upper(): v for k, v in env.items()}
            if not {"PRIVATE_KEY", "PRIVATE_KEY_PATH"} & {k for k, v in environ.items() if v}:
                # checked after the fields, so a run with fields missing would not say it
                found.append(ConfigError("PRIVATE_KEY", "PRIVATE_KEY or PRIVATE_KEY_PATH must be set"))
            return list({str(p): p for p in found}.values())
        return [first]
    return []


def load_settings(env: Mapping[str, str] | None = None) -> tuple[Settings, str]:
    """Read and check every setting; return the settings and the private key PEM.

    ``env`` replaces the process environment (tests, the demo). Raises ConfigError.
    """
    try:
        if env is None:
            settings = Settings()  # pydantic-settings fills it from os.environ
        else:
            settings = Settings.model_validate({k.lower(): v for k, v in env.items()})
    except ValidationError as exc:
        raise _first_problem(exc) from None
    try:
        dburl.check(settings.sqlalchemy_url, pool_size=settings.database_pool_size)
    except dburl.BadDatabaseUrl as exc:
        raise ConfigError("DATABASE_URL", str(exc)) from None
    if settings.reviewer == "llm":
        check_llm_settings(settings)
    return settings, settings.private_key_pem()


def ephemeral_sqlite_problem(settings: Settings, environ: Mapping[str, str]) -> ConfigError | None:
    """On a Heroku dyno (``DYNO`` is set) the filesystem is thrown away at every restart (at least
    daily): a SQLite ledger would forget which deliveries it handled and redeliveries would run
    twice. ``serve`` refuses that unless the operator says it is fine."""
    if settings.allow_ephemeral_sqlite or not dburl.erased_on_restart(settings.sqlalchemy_url, environ):
        return None
    return ConfigError(
        "DATABASE_URL",
        "SQLite on a Heroku dyno is erased at every restart (the ledger would forget deliveries and "
        "redeliveries would run twice); add heroku-postgresql, or set ALLOW_EPHEMERAL_SQLITE=1",
    )


LLM_SDK = {"openai": "openai", "anthropic": "anthropic"}


def check_llm_settings(settings: LlmSettings) -> None:
    """``REVIEWER=llm`` needs a usable provider: its SDK installed, a model, and a key (an
    OpenAI-compatible server of one's own, ``LLM_BASE_URL``, may need none). Never a silent
    fallback to the built-in reviewer."""
    import importlib.util

    package = LLM_SDK[settings.llm_provider]
    if importlib.util.find_spec(package) is None:
        raise ConfigError(
            "LLM_PROVIDER",
            f"{settings.llm_provider!r} needs the {package!r} package: pip install 'revbot[llm]'",
        )
    if not settings.llm_model:
        raise ConfigError("LLM_MODEL", "is required with REVIEWER=llm (the provider's model name)")
    keyless = settings.llm_provider == "openai" and settings.llm_base_url is not None
    if settings.llm_api_key is None and not keyless:
        where = "Anthropic" if settings.llm_provider == "anthropic" else "OpenAI (or set LLM_BASE_URL)"
        raise ConfigError("LLM_API_KEY", f"is required with REVIEWER=llm for {where}")
