"""Command line: ``python -m app serve | worker | doctor | review | demo``.

``serve`` runs the webhook server with the worker in-process (Procfile ``web:``); ``worker`` runs
the worker alone (Procfile ``worker:``, for scaling out on PostgreSQL); ``doctor`` checks the
settings, the database and GitHub, and says what is wrong in plain words; ``review`` prints
the review the bot would post, for a real PR or a local git range, without posting; ``demo``
plays a pull request's story against a fake GitHub, offline.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

import aiohttp
import gidgethub

from .config import ConfigError, Settings, load_settings
from .logs import setup_logging

EXIT_CONFIG = 2
EXIT_RUNTIME = 1


def _settings_or_exit() -> tuple[Settings, str]:
    try:
        return load_settings()
    except ConfigError as exc:
        print(f"revbot: configuration error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None


def _run_service(command: str) -> int:
    """``serve`` or ``worker`` until SIGTERM. A failure to start (or an unexpected stop) is one
    line on stderr naming the problem, exit status 1; the traceback only with LOG_LEVEL=debug."""
    from .runtime import Runtime, StartupError, one_line, serve, work

    settings, pem = _settings_or_exit()
    setup_logging(settings.log_level_number)
    try:
        runtime = Runtime(settings, pem)
        if command == "serve":
            asyncio.run(serve(runtime, host=settings.host, port=settings.port))
        else:
            asyncio.run(work(runtime))
    except Exception as exc:  # noqa: BLE001 - the process boundary: one line, not a traceback
        problem = str(exc) if isinstance(exc, StartupError) else f"stopped unexpectedly: {one_line(exc)}"
        print(f"revbot: {problem}", file=sys.stderr)
        if settings.log_level == "debug":
            traceback.print_exception(exc, file=sys.stderr)
        return EXIT_RUNTIME
    return 0


def _serve(args: argparse.Namespace) -> int:
    return _run_service("serve")


def _worker(args: argparse.Namespace) -> int:
    return _run_service("worker")


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


async def _review_remote(target: str, output: str) -> int:
    """Print the review the bot would post on a real PR, without posting anything."""
    from .config import RepoConfig, default_graphql_url
    from .github import GitHubClient, get_pull
    from .guards import BotIdentity
    from .handlers.common import build_context
    from .handlers.review import plan_for, policy_for
    from .review.engine import BuiltinReviewer
    from .review.report import as_json, as_text

    match = re.fullmatch(r"([\w.-]+/[\w.-]+)#(\d+)", target)
    if match is None:
        print(f"revbot: expected OWNER/REPO#NUMBER, got {target!r}", file=sys.stderr)
        return EXIT_CONFIG
    token = os.environ.get("GITHUB_TOKEN", "").strip()
    if not token:
        print("revbot: GITHUB_TOKEN: is required to read the pull request", file=sys.stderr)
        return EXIT_CONFIG
    api_url = os.environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
    graphql_url = os.environ.get("GITHUB_GRAPHQL_URL") or default_graphql_url(api_url)
    repo, number = match.group(1), int(match.group(2))
    identity = BotIdentity.from_slug(os.environ.get("APP_SLUG") or "revbot")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        gh = GitHubClient(session, api_url=api_url, graphql_url=graphql_url, oauth_token=token)
        pull = await get_pull(gh, repo=repo, pr_number=number)
        config = RepoConfig()
        context = await build_context(gh, repo=repo, pull=pull, config=config)
        result = await BuiltinReviewer().review(context)
    policy = policy_for(context, config=config, approve=True, identity=identity)
    plan = plan_for(result, context, policy=policy, trigger="cli", identity=identity)
    if output == "json":
        print(as_json(result, head_sha=context.head_sha, event=plan.event))
    else:
        print(as_text(result, label=target, head_sha=context.head_sha))
        print(f"\nWould post a {plan.event} review with {len(plan.comments)} inline comment(s):\n")
        print(plan.body)
    return 0


async def _review_local(revisions: str, repo_path: str, output: str) -> int:
    from .review.engine import BuiltinReviewer
    from .review.local import GitError, context_from_git
    from .review.report import as_json, as_text

    base, dots, head = revisions.partition("..")
    if not dots or not base or not head.lstrip("."):
        print(f"revbot: --git expects BASE..HEAD, got {revisions!r}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        context = await context_from_git(Path(repo_path), base, head.lstrip("."))
    except GitError as exc:
        print(f"revbot: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    result = await BuiltinReviewer().review(context)
    if output == "json":
        print(as_json(result, head_sha=context.head_sha))
    else:
        print(as_text(result, label=revisions, head_sha=context.head_sha))
    # Usable as a pre-commit hook or CI step: blockers fail it.
    return 1 if result.verdict.value == "REQUEST_CHANGES" else 0


def _review(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING)
    if args.git:
        return asyncio.run(_review_local(args.git, args.repo, args.format))
    if not args.target:
        print("revbot: give OWNER/REPO#NUMBER, or --git BASE..HEAD", file=sys.stderr)
        return EXIT_CONFIG
    return asyncio.run(_review_remote(args.target, args.format))


def _demo(args: argparse.Namespace) -> int:
    from .demo import DemoOptions, run_demo

    options = DemoOptions(scenario=args.scenario, approve=not args.no_approve, html=args.html)
    return run_demo(options)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app", description="revbot, a pull-request review GitHub App"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", help="run the webhook server and the worker").set_defaults(run=_serve)
    commands.add_parser("worker", help="run only the worker").set_defaults(run=_worker)
    commands.add_parser("doctor", help="check settings, database and GitHub access").set_defaults(run=_doctor)
    review = commands.add_parser(
        "review",
        help="print the review the bot would post (a GitHub PR, or a local git range) without posting",
    )
    review.add_argument("target", nargs="?", help="OWNER/REPO#NUMBER (reads GITHUB_TOKEN)")
    review.add_argument("--git", metavar="BASE..HEAD", help="review a local git range instead (no network)")
    review.add_argument("--repo", default=".", help="the local repository for --git (default: .)")
    review.add_argument("--format", choices=("text", "json"), default="text")
    review.set_defaults(run=_review)
    demo = commands.add_parser(
        "demo",
        help="play a story: the real bot against a sandbox GitHub, printed as a timeline",
        description="Start a sandbox GitHub and the real bot on 127.0.0.1 (SQLite in a temp dir, kept), "
        "play a story on a sample repository and print what every side did.",
    )
    demo.add_argument(
        "--scenario",
        choices=("story", "mention", "big-pr", "redelivery", "crash-recovery"),
        default="story",
        help="which story to play (default: story)",
    )
    demo.add_argument(
        "--no-approve",
        action="store_true",
        help="run the bot with REVIEW_APPROVE=false: it dismisses its own block instead of approving",
    )
    demo.add_argument(
        "--html", type=Path, metavar="PATH", help="also write the PR's final conversation as an HTML page"
    )
    demo.set_defaults(run=_demo)
    args = parser.parse_args(argv)
    result: int = args.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
