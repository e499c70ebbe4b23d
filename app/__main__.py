"""Command line: ``python -m app serve | worker | doctor``.

``serve`` runs the webhook server with the worker in-process (Procfile ``web:``); ``worker`` runs
the worker alone (Procfile ``worker:``, for scaling out on PostgreSQL); ``doctor`` checks the
settings, the database and GitHub, and says what is wrong in plain words.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

import aiohttp
import gidgethub

from .config import ConfigError, Settings, load_settings
from .logs import setup_logging

EXIT_CONFIG = 2


def _settings_or_exit() -> tuple[Settings, str]:
    try:
        return load_settings()
    except ConfigError as exc:
        print(f"revbot: configuration error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None


def _serve(args: argparse.Namespace) -> int:
    from .runtime import Runtime, serve

    settings, pem = _settings_or_exit()
    setup_logging(settings.log_level_number)
    asyncio.run(serve(Runtime(settings, pem), host=settings.host, port=settings.port))
    return 0


def _worker(args: argparse.Namespace) -> int:
    from .runtime import Runtime, work

    settings, pem = _settings_or_exit()
    setup_logging(settings.log_level_number)
    asyncio.run(work(Runtime(settings, pem)))
    return 0


async def _doctor_checks(settings: Settings, pem: str) -> list[tuple[str, bool, str]]:
    from .auth import AppJWT
    from .github import AppClient
    from .store import Store

    results: list[tuple[str, bool, str]] = [
        ("settings", True, "all required settings present and well-formed")
    ]
    store = Store(settings.sqlalchemy_url)
    try:
        await store.create_schema()
        results.append(("database", await store.ping(), settings.sqlalchemy_url.split("@")[-1]))
    except (OSError, RuntimeError, ValueError) as exc:
        results.append(("database", False, str(exc)))
    finally:
        await store.close()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as session:
        client = AppClient(session, app_jwt=AppJWT(settings.app_id, pem), api_url=settings.github_api_url)
        try:
            app = await client.get_app()
            results.append(("github", True, f"authenticated as App {app.get('slug')!r} (id {app.get('id')})"))
        except (gidgethub.GitHubException, aiohttp.ClientError, TimeoutError) as exc:
            results.append(("github", False, f"GET /app failed: {type(exc).__name__}: {exc}"))
    return results


def _doctor(args: argparse.Namespace) -> int:
    settings, pem = _settings_or_exit()
    setup_logging(logging.WARNING)
    results = asyncio.run(_doctor_checks(settings, pem))
    for name, ok, detail in results:
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
    return 0 if all(ok for _, ok, _ in results) else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app", description="revbot, a pull-request review GitHub App"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", help="run the webhook server and the worker").set_defaults(run=_serve)
    commands.add_parser("worker", help="run only the worker").set_defaults(run=_worker)
    commands.add_parser("doctor", help="check settings, database and GitHub access").set_defaults(run=_doctor)
    args = parser.parse_args(argv)
    result: int = args.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
