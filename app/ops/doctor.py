"""``python -m app doctor``: is this deployment healthy? Read-only: it never creates a database,
a table or a setting; it only reads and says what is wrong and where to fix it.

Checks: the settings; the database (reachable, schema, what the queue holds); an analysis
process (it starts, with no network, and which of the host's files it sees); the linters the
reviewer runs; the App on GitHub
(authenticates; granted permissions and subscribed events against ``app.yml``); the App's
webhook (URL, secret, content type); recent deliveries from GitHub's log; and the running bot's
``/metrics`` endpoint; with ``REVIEWER=llm``, one tiny timed request to the model provider.
Exit status 0 when nothing failed, 1 with the list of problems.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import aiohttp
import gidgethub
from sqlalchemy import func, inspect, select
from sqlalchemy.exc import SQLAlchemyError

from ..github.app import AppClient
from ..github.auth import AppJWT
from ..intake.recovery import github_time, never_delivered, succeeded
from ..review.isolation.limits import Confinement
from ..settings.config import AnalysisSettings, Settings, ephemeral_sqlite_problem
from ..store import SCHEMA_VERSION, JobStatus, deliveries, read_only_engine, schema_version

if TYPE_CHECKING:
    from ..review.isolation.process import Isolation

Level = Literal["ok", "warn", "FAIL"]
LEVELS = {"none": 0, "read": 1, "write": 2, "admin": 3}
RECENT_SECONDS = 24 * 3600
GITHUB_ERRORS = (gidgethub.GitHubException, aiohttp.ClientError, TimeoutError)


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    level: Level
    detail: str


# ------------------------------------------------------------------ pure decisions
def compare_to_manifest(
    manifest: Mapping[str, Any], app: Mapping[str, Any], *, settings_url: str
) -> list[Check]:
    """The App's granted permissions and subscribed events against what ``app.yml`` asks for."""
    checks: list[Check] = []
    granted = app.get("permissions") or {}
    for name, wanted in (manifest.get("default_permissions") or {}).items():
        has = str(granted.get(name, "none"))
        if LEVELS.get(has, 0) < LEVELS.get(str(wanted), 0):
            checks.append(
                Check(
                    f"permission {name}",
                    "FAIL",
                    f"needs {wanted}, the App has {has}: change it under 'Permissions' at {settings_url} "
                    "(each installation must then accept the new permissions)",
                )
            )
    subscribed = set(app.get("events") or [])
    wanted_events = list(manifest.get("default_events") or [])
    for event in wanted_events:
        if event not in subscribed:
            checks.append(
                Check(
                    f"event {event}",
                    "FAIL",
                    f"not subscribed: tick it under 'Subscribe to events' at {settings_url}",
                )
            )
    for event in sorted(subscribed - set(wanted_events)):
        checks.append(
            Check(
                f"event {event}",
                "warn",
                "subscribed but nothing handles it (each delivery still stores a row): "
                f"untick it at {settings_url}",
            )
        )
    if not checks:
        checks.append(Check("permissions and events", "ok", "as app.yml asks"))
    return checks


def check_hook_config(config: Mapping[str, Any], settings: Settings) -> list[Check]:
    checks: list[Check] = []
    url = str(config.get("url") or "")
    if not url:
        checks.append(
            Check("webhook url", "FAIL", "the App has no webhook URL: set it in the App's settings")
        )
    elif settings.webhook_proxy_url and url == settings.webhook_proxy_url:
        checks.append(Check("webhook url", "ok", f"{url} (the proxy channel WEBHOOK_PROXY_URL reads)"))
    elif not url.rstrip("/").endswith(settings.webhook_path):
        checks.append(
            Check("webhook url", "FAIL", f"{url} does not end with WEBHOOK_PATH {settings.webhook_path}")
        )
    elif not url.startswith("https://") and "://127.0.0.1" not in url and "://localhost" not in url:
        checks.append(Check("webhook url", "warn", f"{url} is not https: deliveries travel in clear text"))
    else:
        checks.append(Check("webhook url", "ok", url))
    if not config.get("secret"):
        checks.append(
            Check(
                "webhook secret", "FAIL", "the App's webhook has no secret: set it to WEBHOOK_SECRET's value"
            )
        )
    else:
        checks.append(
            Check("webhook secret", "ok", "set (GitHub never shows it: it must equal WEBHOOK_SECRET)")
        )
    if settings.webhook_secret_previous is not None:
        checks.append(
            Check(
                "previous webhook secret",
                "warn",
                "WEBHOOK_SECRET_PREVIOUS is still set: once revbot_webhook_previous_secret_total on "
                "/metrics stops growing (the rotation is over), unset it",
            )
        )
    if config.get("content_type") == "form":
        checks.append(Check("webhook content type", "FAIL", "form: set it to application/json"))
    return checks


def check_recent_deliveries(attempts: Sequence[Mapping[str, Any]], *, now: float) -> Check:
    """GitHub's log of the last day: the newest attempt failing means the bot is unreachable now."""
    recent = [a for a in attempts if now - github_time(str(a["delivered_at"])) <= RECENT_SECONDS]
    if not recent:
        return Check("deliveries", "ok", "none in the last 24 h")
    newest = max(recent, key=lambda a: int(a["id"]))
    failed = never_delivered([dict(a) for a in recent])
    if not succeeded(newest.get("status_code")):
        return Check(
            "deliveries",
            "FAIL",
            f"the latest delivery ({newest['event']}, {newest['delivered_at']}) failed: {newest['status']}; "
            f"{len(failed)} of {len(recent)} in the last 24 h never arrived",
        )
    if failed:
        return Check(
            "deliveries",
            "warn",
            f"{len(failed)} of {len(recent)} in the last 24 h never arrived (the bot recovers them from "
            "GitHub's log while it runs); the latest arrived",
        )
    return Check("deliveries", "ok", f"all {len(recent)} of the last 24 h arrived")


def metrics_url_for(hook_url: str, settings: Settings) -> str | None:
    """Where the bot behind this webhook URL serves ``/metrics`` (None: not derivable)."""
    base = hook_url.rstrip("/")
    if not base.endswith(settings.webhook_path):
        return None
    return base.removesuffix(settings.webhook_path) + "/metrics"


# ------------------------------------------------------------------ I/O
async def check_database(settings: Settings) -> Check:
    try:
        engine = read_only_engine(settings.sqlalchemy_url)
    except FileNotFoundError as missing:
        return Check("database", "warn", f"no database at {missing} yet (`serve` creates it)")
    where = settings.sqlalchemy_url.split("@")[-1]
    try:
        async with engine.connect() as conn:
            exists = await conn.run_sync(lambda sync: inspect(sync).has_table("deliveries"))
            if not exists:
                return Check("database", "warn", f"{where}: reachable, no tables yet (`serve` creates them)")
            version = (await conn.execute(select(func.max(schema_version.c.version)))).scalar()
            by_status = select(deliveries.c.status, func.count()).group_by(deliveries.c.status)
            counts: dict[str, int] = {status: count for status, count in await conn.execute(by_status)}
    except (SQLAlchemyError, OSError, TimeoutError) as exc:
        return Check("database", "FAIL", f"{where}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
    finally:
        await engine.dispose()
    if version is not None and version > SCHEMA_VERSION:
        return Check(
            "database", "FAIL", f"schema version {version} is newer than this code ({SCHEMA_VERSION})"
        )
    shown = (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.WAITING, JobStatus.FAILED)
    queue = ", ".join(f"{counts.get(s, 0)} {s}" for s in shown)
    return Check("database", "ok", f"{where}: schema {version}; {queue}")


async def check_metrics(session: aiohttp.ClientSession, url: str, settings: Settings) -> Check:
    token = settings.metrics_token.get_secret_value() if settings.metrics_token else None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with session.get(url, headers=headers) as answer:
            body = await answer.text()
            status = answer.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        return Check("metrics", "FAIL", f"{url}: the bot does not answer ({type(exc).__name__})")
    if status == 401:
        return Check("metrics", "FAIL", f"{url}: 401, METRICS_TOKEN here differs from the bot's")
    if status == 403:
        # The bot has no METRICS_TOKEN and was not told METRICS_PUBLIC=1: closed on purpose.
        return Check("metrics", "warn", f"{url}: closed; set METRICS_TOKEN on the bot and here to read them")
    if status != 200 or "revbot_webhook_deliveries" not in body:
        return Check("metrics", "FAIL", f"{url}: answered {status}, not revbot's metrics")
    return Check("metrics", "ok", url)


async def check_llm(settings: Settings) -> Check:
    """One tiny request to the model provider, timed (``REVIEWER=llm``)."""
    from ..review.llm.providers import ProviderError, make_provider, ping

    provider = make_provider(settings)
    where = settings.llm_base_url or settings.llm_provider
    try:
        seconds, said = await ping(provider)
    except ProviderError as exc:
        return Check("llm", "FAIL", f"{settings.llm_model} at {where}: {exc}")
    finally:
        await provider.aclose()
    return Check("llm", "ok", f"{settings.llm_model} at {where} answered in {seconds:.2f}s ({said!r})")


_FILESYSTEM = {
    Confinement.PRIVATE_ROOT: "a private root (their own directory, and read only what they need to run)",
    Confinement.LANDLOCK: "Landlock (only their own directory, and read only what they need to run)",
    Confinement.NONE: "the host's files, as the bot's user sees them",
}


def isolation_check(isolation: Isolation) -> Check:
    """What the analysis processes are kept from: a warning for each thing they are not."""
    files = f"files: {isolation.filesystem.value}, {_FILESYSTEM[isolation.filesystem]}"
    problems = []
    if not isolation.offline:
        problems.append(
            f"they share this host's network ({isolation.network_why}); "
            "allow network namespaces (unshare) to take it from them"
        )
    if isolation.filesystem is Confinement.NONE:
        problems.append(
            f"they can read what the bot's user can ({isolation.filesystem_why}); allow user and "
            "mount namespaces, or enable Landlock, to keep the bot's own files from them"
        )
    if isolation.processes_why:
        problems.append(
            f"they could signal the bot's process ({isolation.processes_why}); "
            "allow PID namespaces (unshare) to hide it from them"
        )
    if problems:
        return Check("analysis", "warn", f"analysis processes start, but {'; '.join(problems)}; {files}")
    return Check(
        "analysis",
        "ok",
        f"analysis processes start, bounded, with no network, in their own PID namespace; {files}",
    )


async def check_analysis(settings: AnalysisSettings) -> Check:
    """One analysis process started as ``serve`` starts them: does it, and what is it kept from?"""
    from ..review.isolation.limits import AnalysisError
    from ..review.isolation.pool import pool_of

    pool = pool_of(settings, workers=1)
    try:
        isolation = await pool.isolation()
    except AnalysisError as exc:
        return Check("analysis", "FAIL", f"an analysis process does not start: {exc}")
    finally:
        pool.close()
    return isolation_check(isolation)


def check_linters(find: Callable[[str], Sequence[str] | None] | None = None) -> list[Check]:
    """Is each linter the built-in reviewer runs installed? One it cannot find is a warning: the
    files it checks are reviewed without it, and each review says so."""
    from ..review.analyzers import LINTERS, find_tool

    locate = find if find is not None else find_tool
    checks: list[Check] = []
    for tool in LINTERS:
        command = locate(tool.program)
        if command is None:  # the operator is told where; the public review never is
            where = f"; this bot runs {sys.executable}"
            checks.append(Check(f"linter {tool.program}", "warn", tool.missing() + where))
        else:
            checks.append(
                Check(f"linter {tool.program}", "ok", f"{tool.checks} checked by {' '.join(command)}")
            )
    return checks


async def run_checks(
    settings: Settings,
    pem: str,
    *,
    environ: Mapping[str, str],
    manifest: Mapping[str, Any] | None,
    bot_url: str | None = None,
) -> list[Check]:
    checks = [Check("settings", "ok", "all required settings present and well-formed")]
    problem = ephemeral_sqlite_problem(settings, environ)
    if problem is not None:
        checks.append(Check("settings", "FAIL", str(problem)))
    checks.append(await check_database(settings))
    checks.append(await check_analysis(settings))
    checks.extend(check_linters())
    if settings.reviewer == "llm":
        checks.append(await check_llm(settings))
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as session:
        client = AppClient(session, app_jwt=AppJWT(settings.app_id, pem), api_url=settings.github_api_url)
        try:
            app = await client.get_app()
        except GITHUB_ERRORS as exc:
            checks.append(Check("github", "FAIL", f"GET /app failed: {type(exc).__name__}: {exc}"))
            return checks
        checks.append(Check("github", "ok", f"authenticated as App {app.get('slug')!r} (id {app.get('id')})"))
        web_base = str(app.get("html_url") or "").split("/apps/")[0]
        owner = app.get("owner") or {}
        prefix = f"/organizations/{owner.get('login')}" if owner.get("type") == "Organization" else ""
        settings_url = f"{web_base}{prefix}/settings/apps/{app.get('slug')}/permissions"
        if manifest is None:
            checks.append(Check("permissions and events", "warn", "app.yml not found: not compared"))
        else:
            checks.extend(compare_to_manifest(manifest, app, settings_url=settings_url))
        hook_url: str | None = None
        try:
            config = await client.get_hook_config()
            hook_url = str(config.get("url") or "") or None
            checks.extend(check_hook_config(config, settings))
        except GITHUB_ERRORS as exc:
            checks.append(
                Check("webhook", "FAIL", f"GET /app/hook/config failed: {type(exc).__name__}: {exc}")
            )
        try:
            now = time.time()
            attempts = []
            async for attempt in client.iter_hook_deliveries():
                attempts.append(attempt)
                if now - github_time(str(attempt["delivered_at"])) > RECENT_SECONDS:
                    break
            checks.append(check_recent_deliveries(attempts, now=now))
        except GITHUB_ERRORS as exc:
            checks.append(
                Check("deliveries", "FAIL", f"GET /app/hook/deliveries failed: {type(exc).__name__}: {exc}")
            )
        target = (
            (bot_url.rstrip("/") + "/metrics")
            if bot_url
            else (metrics_url_for(hook_url, settings) if hook_url else None)
        )
        if target is None:
            checks.append(
                Check("metrics", "warn", "cannot tell where the bot runs from the webhook URL: use --url")
            )
        else:
            checks.append(await check_metrics(session, target, settings))
    return checks


def report(checks: Sequence[Check]) -> tuple[str, int]:
    """The printed report and the exit status (1 when anything failed)."""
    lines = [f"{c.level:<4} {c.name}: {c.detail}" for c in checks]
    problems = [c for c in checks if c.level == "FAIL"]
    if problems:
        lines.append("")
        lines.append(f"{len(problems)} problem(s):")
        lines.extend(f"  - {c.name}: {c.detail}" for c in problems)
    return "\n".join(lines), 1 if problems else 0
