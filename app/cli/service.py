"""The services and their setup: ``serve``, ``worker``, ``doctor``, ``setup``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
import gidgethub
import yaml

from ..settings.config import ConfigError, ephemeral_sqlite_problem, setting_problems
from ..settings.logs import setup_logging
from .common import EXIT_CONFIG, EXIT_RUNTIME, settings_or_exit

SETTINGS_HINT = (
    "revbot: fix them in the environment or in .env (copy .env.example), or run `python -m app setup` "
    "to register the GitHub App and write .env"
)

if TYPE_CHECKING:
    from .common import Commands


def _run_service(command: str, *, run_worker: bool = True) -> int:
    """``serve`` or ``worker`` until SIGTERM. A failure to start (or an unexpected stop) is one
    line on stderr naming the problem, exit status 1; the traceback only with LOG_LEVEL=debug.
    ``run_worker``: whether ``serve`` runs jobs too, or only records them for worker processes."""
    from ..runtime import Runtime, StartupError, one_line, serve, work
    from ..settings import eventloop

    settings, pem = settings_or_exit()
    loop = eventloop.chosen(settings.event_loop, installed=eventloop.uvloop_installed())
    problem = ephemeral_sqlite_problem(settings, os.environ) or (None if loop else eventloop.NOT_INSTALLED)
    if problem is not None or loop is None:
        print(f"revbot: configuration error: {problem}", file=sys.stderr)
        return EXIT_CONFIG
    setup_logging(settings.log_level_number)
    try:
        runtime = Runtime(settings, pem, run_worker=run_worker)
        if command == "serve":
            eventloop.run(serve(runtime, host=settings.host, port=settings.port), loop=loop)
        else:
            eventloop.run(work(runtime), loop=loop)
    except Exception as exc:  # noqa: BLE001 - the process boundary: one line, not a traceback
        reason = str(exc) if isinstance(exc, StartupError) else f"stopped unexpectedly: {one_line(exc)}"
        print(f"revbot: {reason}", file=sys.stderr)
        if settings.log_level == "debug":
            traceback.print_exception(exc, file=sys.stderr)
        return EXIT_RUNTIME
    return 0


def _serve(args: argparse.Namespace) -> int:
    return _run_service("serve", run_worker=args.worker)


def _worker(args: argparse.Namespace) -> int:
    return _run_service("worker")


def _doctor(args: argparse.Namespace) -> int:
    from ..ops.doctor import report, run_checks
    from ..ops.setup import MANIFEST_PATH

    problems = setting_problems()
    if problems:  # every one at once, and where to fix them
        for problem in problems:
            print(f"revbot: configuration error: {problem}", file=sys.stderr)
        print(SETTINGS_HINT, file=sys.stderr)
        return EXIT_CONFIG
    settings, pem = settings_or_exit()
    setup_logging(logging.WARNING)
    # app.yml sits beside the package in a clone or the Docker image; without it, say so and go on
    manifest = yaml.safe_load(MANIFEST_PATH.read_text(encoding="utf-8")) if MANIFEST_PATH.is_file() else None
    checks = asyncio.run(run_checks(settings, pem, environ=os.environ, manifest=manifest, bot_url=args.url))
    text, status = report(checks)
    print(text)
    return status


def _setup(args: argparse.Namespace) -> int:
    from ..ops.setup import SetupOptions, run_setup

    logging.basicConfig(level=logging.WARNING)
    options = SetupOptions(
        env_path=Path(args.env),
        github_url=(args.github_url or os.environ.get("GITHUB_URL") or "https://github.com").rstrip("/"),
        host=args.host,
        proxy_url=os.environ.get("WEBHOOK_PROXY_URL") or None,
        org=args.org,
        port=args.port,
        force=args.force,
    )
    try:
        asyncio.run(run_setup(options))
    except (ConfigError, FileExistsError) as exc:
        print(f"revbot: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except (OSError, aiohttp.ClientError, gidgethub.GitHubException) as exc:
        print(f"revbot: setup failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


def add_commands(commands: Commands) -> None:
    """serve, worker, doctor, setup"""
    serving = commands.add_parser(
        "serve",
        help="run the webhook server and the worker",
        description="Answer GitHub's webhooks, record each delivery, and run the jobs they make, "
        "until SIGTERM. With --no-worker it only records them: `python -m app worker` processes "
        "sharing the database run them, and no review takes this process's CPU.",
    )
    serving.add_argument(
        "--no-worker",
        dest="worker",
        action="store_false",
        help="record deliveries only; run the jobs in separate `python -m app worker` processes",
    )
    serving.set_defaults(run=_serve)
    commands.add_parser("worker", help="run only the worker").set_defaults(run=_worker)
    doctor = commands.add_parser(
        "doctor",
        help="check settings, database, the App on GitHub, its webhook, deliveries and /metrics (read-only)",
        description="Check everything the bot needs and say what is wrong in plain words: every missing "
        "or malformed setting at once (with where to fix it), the database, the App on GitHub and its "
        "webhook, the latest deliveries, the linters, and the running bot's /metrics. Changes nothing.",
    )
    doctor.add_argument("--url", help="the running bot's base URL (default: from the App's webhook URL)")
    doctor.set_defaults(run=_doctor)
    setup = commands.add_parser(
        "setup",
        help="register the GitHub App from app.yml (GitHub's manifest flow) and write .env",
        description="Serve a local page whose button registers the App on GitHub from app.yml, then "
        "write the App's id, key and secrets to .env (mode 0600) and print the install URL.",
    )
    setup.add_argument("--org", help="register the App in this organization (default: your account)")
    setup.add_argument("--host", help="the bot's public URL, e.g. https://revbot.fly.dev (webhooks go there)")
    setup.add_argument(
        "--github-url",
        help="GitHub's web address (default: GITHUB_URL or https://github.com; GHES: https://HOST)",
    )
    setup.add_argument("--port", type=int, default=3000, help="port of the local page (default: 3000)")
    setup.add_argument("--env", default=".env", help="where to write the settings (default: .env)")
    setup.add_argument("--force", action="store_true", help="replace an existing .env")
    setup.set_defaults(run=_setup)
