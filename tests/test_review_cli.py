"""``python -m app review``: the same engine on a local git range, and on a PR without posting."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from app.github.app import AppClient
from app.github.auth import AppJWT
from tests.harness import INSTALLATION, REPO, BotHarness

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "work"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Dev")
    (repo / "app.py").write_text("def add(a, b):\n    return a + b\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    git(repo, "checkout", "-qb", "topic")
    (repo / "app.py").write_text("def add(a, b):\n    return a + b\n\n\ndef oops():\n    return nope\n")
    (repo / "notes.md").write_text("<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> other\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "topic")
    return repo


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", "review", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_review_a_local_git_range_as_json(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    result = run_cli("--git", "main..topic", "--repo", str(repo), "--format", "json")
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["verdict"] == "REQUEST_CHANGES"
    assert data["head_sha"] == git(repo, "rev-parse", "topic")
    found = {(f["path"], f["line"], f["rule"], f["severity"]) for f in data["findings"]}
    assert ("app.py", 6, "python/F821", "blocker") in found
    assert ("notes.md", 1, "conflict-marker", "blocker") in found
    assert all(set(f) >= {"path", "line", "severity", "rule", "message"} for f in data["findings"])


def test_review_a_clean_local_range_as_text_exits_0(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    git(repo, "checkout", "-qb", "clean", "main")
    (repo / "more.py").write_text("def sub(a, b):\n    return a - b\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "clean")
    result = run_cli("--git", "main..clean", "--repo", str(repo))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].endswith(": APPROVE")


def test_a_bad_range_is_a_clear_error(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    result = run_cli("--git", "main..nowhere", "--repo", str(repo))
    assert result.returncode == 2
    assert "revbot: git rev-parse" in result.stderr
    assert run_cli("--git", "main", "--repo", str(repo)).returncode == 2


async def installation_token(bot: BotHarness, session: aiohttp.ClientSession) -> str:
    """A token for the harness's installation, minted from the running fake as the App would."""
    app = AppClient(session, app_jwt=AppJWT(4242, bot.fake.private_key_pem), api_url=bot.fake.base_url)
    return (await app.mint_installation_token(INSTALLATION)).token


async def cli_review_json(
    bot: BotHarness, number: int, env: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], int]:
    """``python -m app review OWNER/REPO#N --format json`` against the running fake GitHub: its
    JSON, and the index of the first call it made in ``bot.fake.calls``."""
    async with aiohttp.ClientSession() as session:
        token = await installation_token(bot, session)
    before = len(bot.fake.calls)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app",
        "review",
        f"{REPO}#{number}",
        "--format",
        "json",
        cwd=ROOT,
        env={**os.environ, **(env or {}), "GITHUB_TOKEN": token, "GITHUB_API_URL": bot.fake.base_url},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    data: dict[str, Any] = json.loads(out)
    return data, before


async def review_pull_with_the_cli(bot: BotHarness, number: int) -> tuple[dict[str, Any], int]:
    """``cli_review_json`` against the fake GitHub, started for it, then stopped."""
    await bot.fake.start(port=bot.fake_port)
    try:
        return await cli_review_json(bot, number)
    finally:
        await bot.fake.stop()


@pytest.mark.e2e
async def test_review_a_pull_request_prints_and_posts_nothing(tmp_path: Path) -> None:
    bot = BotHarness(tmp_path)
    number = bot.open_pull({"src/app.py": "def run():\n    return missing\n"}, author="alice")
    data, before = await review_pull_with_the_cli(bot, number)
    assert (data["verdict"], data["event"]) == ("REQUEST_CHANGES", "REQUEST_CHANGES")
    assert [(f["path"], f["line"], f["rule"]) for f in data["findings"]] == [("src/app.py", 2, "python/F821")]
    assert bot.fake.writes() == []
    assert {c.method for c in bot.fake.calls[before:]} <= {"GET", "POST"}
    assert all(c.path == "/graphql" for c in bot.fake.calls[before:] if c.method == "POST")
    bot.assert_conforms()


@pytest.mark.e2e
async def test_a_pull_request_github_does_not_know_is_one_line_and_exit_1(tmp_path: Path) -> None:
    bot = BotHarness(tmp_path)
    bot.open_pull({"src/app.py": "X = 1\n"}, author="alice")
    await bot.fake.start(port=bot.fake_port)
    try:
        async with aiohttp.ClientSession() as session:
            token = await installation_token(bot, session)
        done = await asyncio.to_thread(
            run_cli, f"{REPO}#404", env={"GITHUB_TOKEN": token, "GITHUB_API_URL": bot.fake.base_url}
        )
    finally:
        await bot.fake.stop()
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"revbot: reading {REPO}#404 from GitHub failed: ")
    assert len(done.stderr.splitlines()) == 1, done.stderr
