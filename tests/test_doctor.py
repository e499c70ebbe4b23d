"""``python -m app doctor`` against the fake GitHub and a running bot: every check, the report,
the exit status, and that it only reads (no database file, no table is ever created)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import create_async_engine

from app.ops.doctor import Check, check_recent_deliveries, compare_to_manifest, report, run_checks
from app.ops.setup import MANIFEST_PATH
from app.settings.config import load_settings
from app.store import SCHEMA_VERSION
from tests.harness import BotHarness, free_port

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "doctor-metrics-token"
MANIFEST: dict[str, Any] = yaml.safe_load(MANIFEST_PATH.read_text())


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[BotHarness]:
    harness = BotHarness(tmp_path, env={"METRICS_TOKEN": TOKEN})
    info = harness.fake.shapes.app_info
    info.events = list(MANIFEST["default_events"])  # registered from app.yml
    info.permissions = dict(MANIFEST["default_permissions"])
    await harness.start()
    yield harness
    await harness.stop()
    harness.assert_conforms()


async def doctor(bot: BotHarness, **env: str) -> list[Check]:
    settings, pem = load_settings({**bot.env(), **env})
    return await run_checks(settings, pem, environ={}, manifest=MANIFEST)


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_healthy_deployment_passes_every_check(bot: BotHarness) -> None:
    number = bot.open_pull({"a.py": "x = 1\n"}, author="alice")
    await bot.fake.send_webhook(
        "pull_request", bot.fake.pull_request_payload("octo/widgets", number, "opened", sender="alice")
    )
    await bot.drain()
    checks = await doctor(bot)
    assert [c for c in checks if c.level != "ok"] == []
    found = by_name(checks)
    assert set(found) == {
        "settings",
        "database",
        "analysis",
        "linter zizmor",
        "linter shellcheck",
        "linter hadolint",
        "github",
        "permissions and events",
        "webhook url",
        "webhook secret",
        "deliveries",
        "metrics",
    }
    assert found["metrics"].detail == f"http://127.0.0.1:{bot.bot_port}/metrics"
    assert found["deliveries"].detail == "all 1 of the last 24 h arrived"
    timers = await bot.timers()  # readiness's later looks are queued jobs, due later
    assert found["database"].detail.endswith(
        f"schema {SCHEMA_VERSION}; {len(timers)} queued, 0 running, 0 waiting, 0 failed"
    )
    text, status = report(checks)
    assert status == 0 and "problem" not in text


@pytest.mark.e2e
@pytest.mark.slow
async def test_every_problem_is_named_with_where_to_fix_it(bot: BotHarness) -> None:
    info = bot.fake.shapes.app_info
    info.permissions["pull_requests"] = "read"
    info.events.remove("issue_comment")
    info.events.append("push")
    bot.fake.set_webhook_secret("")
    bot.fake.hooks.add(
        guid="g1",
        event="pull_request",
        payload={"action": "opened"},
        url=bot.webhook_url,
        request_headers={},
        status_code=503,
        error=None,
        duration=0.2,
    )
    checks = await doctor(bot, METRICS_TOKEN="not-the-bots")
    found = by_name(checks)
    settings_url = f"{bot.fake.base_url}/organizations/revbot-developer/settings/apps/revbot/permissions"
    assert found["permission pull_requests"].level == "FAIL"
    assert found["permission pull_requests"].detail.startswith(
        f"needs write, the App has read: change it under 'Permissions' at {settings_url}"
    )
    assert (
        found["event issue_comment"].level == "FAIL" and settings_url in found["event issue_comment"].detail
    )
    assert found["event push"].level == "warn"
    assert found["webhook secret"].level == "FAIL"
    assert found["deliveries"].level == "FAIL" and "Invalid HTTP Response: 503" in found["deliveries"].detail
    assert found["metrics"].level == "FAIL" and "METRICS_TOKEN" in found["metrics"].detail
    text, status = report(checks)
    assert status == 1
    failures = [c for c in checks if c.level == "FAIL"]
    assert len(failures) == 5
    assert text.splitlines()[-6:] == ["5 problem(s):", *(f"  - {c.name}: {c.detail}" for c in failures)]


async def test_github_unreachable_fails_and_stops_there(tmp_path: Path, private_key_pem: str) -> None:
    settings, pem = load_settings(
        {
            "APP_ID": "1",
            "PRIVATE_KEY": private_key_pem,
            "WEBHOOK_SECRET": "s",
            "GITHUB_API_URL": f"http://127.0.0.1:{free_port()}",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'none' / 'x.db'}",
        }
    )
    checks = await run_checks(settings, pem, environ={"DYNO": "web.1"}, manifest=MANIFEST)
    assert [(c.name, c.level) for c in checks] == [
        ("settings", "ok"),
        ("settings", "FAIL"),
        ("database", "warn"),
        ("analysis", "ok"),
        ("linter zizmor", "ok"),
        ("linter shellcheck", "ok"),
        ("linter hadolint", "ok"),
        ("github", "FAIL"),
    ]
    assert not (tmp_path / "none").exists()  # read-only: not even the directory


async def test_doctor_never_creates_tables(db_url: str, private_key_pem: str, tmp_path: Path) -> None:
    settings, pem = load_settings(
        {
            "APP_ID": "1",
            "PRIVATE_KEY": private_key_pem,
            "WEBHOOK_SECRET": "s",
            "GITHUB_API_URL": f"http://127.0.0.1:{free_port()}",
            "DATABASE_URL": db_url if db_url.startswith("sqlite") else db_url + "?sslmode=disable",
        }
    )
    checks = await run_checks(settings, pem, environ={}, manifest=MANIFEST)
    assert by_name(checks)["database"].level == "warn"
    if db_url.startswith("sqlite"):
        assert not (tmp_path / "revbot.sqlite3").exists()  # the fixture names it; never created
        return
    engine = create_async_engine(db_url)
    try:
        async with engine.connect() as conn:
            assert await conn.run_sync(lambda sync: inspect(sync).get_table_names()) == []
    finally:
        await engine.dispose()


@pytest.mark.e2e
@pytest.mark.slow
async def test_the_command_prints_the_report_and_exits_1_on_problems(bot: BotHarness) -> None:
    env = {**os.environ, **bot.env(), "METRICS_TOKEN": TOKEN}
    for status, extra in ((0, {}), (1, {"METRICS_TOKEN": "wrong"})):
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "app",
            "doctor",
            env={**env, **extra},
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, _ = await process.communicate()
        assert process.returncode == status, out.decode()
        lines = out.decode().splitlines()
        assert lines[0] == "ok   settings: all required settings present and well-formed"
        assert any(line.startswith("ok   metrics:" if status == 0 else "FAIL metrics:") for line in lines)


def test_recent_deliveries_are_judged_by_the_latest_attempt() -> None:
    def attempt(n: int, guid: str, code: int, status: str = "OK") -> dict[str, Any]:
        return {
            "id": n,
            "guid": guid,
            "status_code": code,
            "status": status,
            "event": "pull_request",
            "delivered_at": "2030-01-01T00:00:00Z",
        }

    now = 1893456000.0 + 60  # a minute after those stamps
    assert check_recent_deliveries([], now=now).level == "ok"
    assert (
        check_recent_deliveries([attempt(1, "a", 502, "failed"), attempt(2, "b", 202)], now=now).level
        == "warn"
    )
    assert (
        check_recent_deliveries([attempt(1, "a", 502, "failed"), attempt(2, "a", 202)], now=now).level == "ok"
    )
    failing = check_recent_deliveries(
        [attempt(1, "a", 202), attempt(2, "b", 503, "Invalid HTTP Response: 503")], now=now
    )
    assert failing.level == "FAIL" and "1 of 2" in failing.detail
    assert check_recent_deliveries([attempt(1, "a", 502)], now=now + 2 * 86400).level == "ok"  # too old


def test_admin_satisfies_write_and_missing_is_none() -> None:
    app = {
        "permissions": {**MANIFEST["default_permissions"], "pull_requests": "admin"},
        "events": MANIFEST["default_events"],
    }
    assert [c.level for c in compare_to_manifest(MANIFEST, app, settings_url="u")] == ["ok"]
    app["permissions"] = {k: v for k, v in app["permissions"].items() if k != "checks"}
    [check] = compare_to_manifest(MANIFEST, app, settings_url="u")
    assert (check.name, check.level) == ("permission checks", "FAIL") and "the App has none" in check.detail


@pytest.mark.e2e
@pytest.mark.slow
async def test_without_app_yml_the_comparison_is_skipped_and_said(bot: BotHarness) -> None:
    settings, pem = load_settings(bot.env())
    checks = await run_checks(settings, pem, environ={}, manifest=None)
    assert by_name(checks)["permissions and events"] == Check(
        "permissions and events", "warn", "app.yml not found: not compared"
    )
    assert report(checks)[1] == 0


async def test_metrics_closed_by_default_are_a_warning_that_names_the_token(tmp_path: Path) -> None:
    harness = BotHarness(tmp_path, env={"METRICS_TOKEN": ""})
    await harness.start()
    try:
        settings, pem = load_settings(harness.env())
        checks = await run_checks(
            settings, pem, environ={}, manifest=MANIFEST, bot_url=f"http://127.0.0.1:{harness.bot_port}"
        )
        found = by_name(checks)["metrics"]
        assert found.level == "warn" and "closed; set METRICS_TOKEN" in found.detail
    finally:
        await harness.stop()


def test_doctor_with_nothing_set_names_every_missing_setting_at_once(tmp_path: Path) -> None:
    """A newcomer's first run: every problem in one run, and where to fix them."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "app", "doctor"],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # no .env here
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)},
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert [line.split(":")[2].strip() for line in lines[:-1]] == ["APP_ID", "WEBHOOK_SECRET", "PRIVATE_KEY"]
    assert "python -m app setup" in lines[-1] and ".env.example" in lines[-1]


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({}, ["APP_ID", "WEBHOOK_SECRET", "PRIVATE_KEY"]),
        ({"APP_ID": "12", "PRIVATE_KEY_PATH": "/nonexistent.pem"}, ["WEBHOOK_SECRET"]),
        ({"APP_ID": "twelve", "WEBHOOK_SECRET": "s"}, ["APP_ID", "PRIVATE_KEY"]),
    ],
)
def test_setting_problems(env: dict[str, str], named: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from app.settings.config import setting_problems

    for name in ("APP_ID", "WEBHOOK_SECRET", "PRIVATE_KEY", "PRIVATE_KEY_PATH"):
        monkeypatch.delenv(name, raising=False)
    assert [p.setting for p in setting_problems(env)] == named
