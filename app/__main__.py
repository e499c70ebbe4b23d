"""Command line: ``python -m app serve | worker | doctor | setup | review | eval | learnings | demo``
and ``replay``.

``serve`` runs the webhook server with the worker in-process (Procfile ``web:``); ``worker`` runs
the worker alone (Procfile ``worker:``, for scaling out on PostgreSQL); ``doctor`` checks the
settings, the database and GitHub, and says what is wrong in plain words; ``setup`` registers
the App from ``app.yml`` and writes ``.env``; ``review`` prints
the review the bot would post, for a real PR or a local git range, without posting; ``eval``
measures a reviewer on a corpus of cases; ``learnings`` lists (and ``--forget`` removes) the
disputes remembered for a repository; ``demo``
plays a pull request's story against a fake GitHub, offline; ``replay`` plays a clone's merged
pull requests through the bot against it and measures what the bot did.
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
from typing import TYPE_CHECKING

import aiohttp
import gidgethub
import yaml

from .config import ConfigError, Settings, ephemeral_sqlite_problem, load_env_file, load_settings
from .logs import setup_logging

if TYPE_CHECKING:
    from .review.core.model import Reviewer
    from .review.measure.evaluate import Case

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
    from . import eventloop
    from .runtime import Runtime, StartupError, one_line, serve, work

    settings, pem = _settings_or_exit()
    loop = eventloop.chosen(settings.event_loop, installed=eventloop.uvloop_installed())
    problem = ephemeral_sqlite_problem(settings, os.environ) or (None if loop else eventloop.NOT_INSTALLED)
    if problem is not None or loop is None:
        print(f"revbot: configuration error: {problem}", file=sys.stderr)
        return EXIT_CONFIG
    setup_logging(settings.log_level_number)
    try:
        runtime = Runtime(settings, pem)
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
    return _run_service("serve")


def _worker(args: argparse.Namespace) -> int:
    return _run_service("worker")


def _doctor(args: argparse.Namespace) -> int:
    from .doctor import report, run_checks
    from .setup import MANIFEST_PATH

    settings, pem = _settings_or_exit()
    setup_logging(logging.WARNING)
    # app.yml sits beside the package in a clone or the Docker image; without it, say so and go on
    manifest = yaml.safe_load(MANIFEST_PATH.read_text(encoding="utf-8")) if MANIFEST_PATH.is_file() else None
    checks = asyncio.run(run_checks(settings, pem, environ=os.environ, manifest=manifest, bot_url=args.url))
    text, status = report(checks)
    print(text)
    return status


async def _review_remote(target: str, output: str) -> int:
    """Print the review the bot would post on a real PR, without posting anything."""
    from .config import RepoConfig, default_graphql_url
    from .github import GitHubClient, get_pull
    from .guards import BotIdentity
    from .review.engine.builtin import BuiltinReviewer
    from .review.output.report import as_json, as_text
    from .review.rounds.markers import Trigger
    from .usecases.pull import build_context
    from .usecases.review import plan_for, policy_for

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
        pull_context = await build_context(gh, repo=repo, pull=pull, config=config, slug=identity.slug)
        result = await BuiltinReviewer().review(pull_context)
    policy = policy_for(pull_context, config=config, approve=True, identity=identity)
    plan = plan_for(result, pull_context, policy=policy, trigger=Trigger.CLI, identity=identity)
    if output == "json":
        print(as_json(result, head_sha=pull_context.head_sha, event=plan.event))
    else:
        print(as_text(result, label=target, head_sha=pull_context.head_sha))
        print(f"\nWould post a {plan.event} review with {len(plan.comments)} inline comment(s):\n")
        print(plan.body)
    return 0


async def _review_local(revisions: str, repo_path: str, output: str) -> int:
    from .review.engine.builtin import BuiltinReviewer
    from .review.measure.local import GitError, context_from_git
    from .review.output.report import as_json, as_text

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


async def _review_history(tip: str, count: int, repo_path: str, output: str) -> int:
    import json

    from .review.engine.builtin import BuiltinReviewer
    from .review.measure.history import History, review_commits
    from .review.measure.local import GitError

    history = History()
    try:
        async for review in review_commits(Path(repo_path), tip=tip, count=count, reviewer=BuiltinReviewer()):
            history.add(review)
            if output == "text":
                print(review.line(), flush=True)
    except GitError as exc:
        print(f"revbot: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if output == "json":
        data = {"commits": [r.as_dict() for r in history.reviews], "totals": history.totals()}
        print(json.dumps(data, indent=2))
    else:
        print()
        print(history.report())
    return 0


def _review(args: argparse.Namespace) -> int:
    from .config import load_analysis_settings

    logging.basicConfig(level=logging.WARNING)
    try:
        load_analysis_settings()  # the analysis bounds (REVIEW_*), checked before any work
    except ConfigError as exc:
        print(f"revbot: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.commits is not None:
        if args.commits < 1:
            print("revbot: --commits expects a positive number", file=sys.stderr)
            return EXIT_CONFIG
        if args.git and ".." in args.git:
            print("revbot: with --commits, --git names the newest commit, not a range", file=sys.stderr)
            return EXIT_CONFIG
        try:
            return asyncio.run(_review_history(args.git or "HEAD", args.commits, args.repo, args.format))
        except BrokenPipeError:  # piped into `head`: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
    if args.git:
        return asyncio.run(_review_local(args.git, args.repo, args.format))
    if not args.target:
        print("revbot: give OWNER/REPO#NUMBER, or --git BASE..HEAD", file=sys.stderr)
        return EXIT_CONFIG
    return asyncio.run(_review_remote(args.target, args.format))


def _rules(args: argparse.Namespace) -> int:
    from .review.engine.rules import rules_markdown

    print(rules_markdown(), end="")
    return 0


def _setup(args: argparse.Namespace) -> int:
    from .setup import SetupOptions, run_setup

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


def _eval_reviewer(reviewer_name: str) -> tuple[Reviewer, str] | None:
    """The reviewer ``eval`` measures and its label; None after a configuration error (said)."""
    from .config import load_llm_settings
    from .review.engine.builtin import BuiltinReviewer

    if reviewer_name != "llm":
        return BuiltinReviewer(), "builtin"
    from .review.llm import build_reviewer

    try:
        settings = load_llm_settings()
    except ConfigError as exc:
        print(f"revbot: configuration error: {exc}", file=sys.stderr)
        return None
    return build_reviewer(settings), f"llm ({settings.llm_provider} {settings.llm_model})"


async def _eval_run(reviewer_name: str, cases: Sequence[Case], output: str) -> int:
    from .review.measure.evaluate import evaluate

    chosen = _eval_reviewer(reviewer_name)
    if chosen is None:
        return EXIT_CONFIG
    reviewer, label = chosen
    try:
        report = await evaluate(cases, reviewer, label=label)
    finally:
        await reviewer.aclose()
    print(report.as_json() if output == "json" else report.as_text())
    return 0


def _eval(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING)
    name = args.reviewer or os.environ.get("REVIEWER", "builtin").strip().lower() or "builtin"
    if name not in ("builtin", "llm"):
        print(f"revbot: configuration error: REVIEWER: {name!r} is not 'builtin' or 'llm'", file=sys.stderr)
        return EXIT_CONFIG
    if args.history is not None:
        return _eval_history(args, name)
    from .review.measure.evaluate import load_cases

    if not args.cases.is_dir():
        print(f"revbot: --cases: {args.cases} is not a directory", file=sys.stderr)
        return EXIT_CONFIG
    cases = load_cases(args.cases)
    if not cases:
        print(f"revbot: --cases: no case.yaml under {args.cases}", file=sys.stderr)
        return EXIT_CONFIG
    return asyncio.run(_eval_run(name, cases, args.format))


async def _learnings_run(url: str, repo: str, forget: int | None) -> int:
    from .review.learnings import DatabaseLearnings
    from .store import Store

    store = Store(url)
    try:
        await store.create_schema()
        learnings = DatabaseLearnings(store.engine, upsert=store.backend.upsert)
        if forget is not None:
            removed = await learnings.forget(repo, forget)
            if removed is None:
                print(f"revbot: {repo} has no learning #{forget}", file=sys.stderr)
                return 1
            print(f"forgot {removed.describe()}")
            return 0
        found = await learnings.of_repo(repo)
        for item in found:
            print(item.describe())
        if not found:
            print(f"{repo} has no learnings")
    finally:
        await store.close()
    return 0


def _learnings(args: argparse.Namespace) -> int:
    from .dburl import BadDatabaseUrl, sqlalchemy_url

    if re.fullmatch(r"[\w.-]+/[\w.-]+", args.repo) is None:
        print(f"revbot: --repo expects OWNER/NAME, got {args.repo!r}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        url = sqlalchemy_url(os.environ.get("DATABASE_URL", "").strip() or None)
    except BadDatabaseUrl as exc:
        print(f"revbot: configuration error: DATABASE_URL: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return asyncio.run(_learnings_run(url, args.repo, args.forget))


async def _eval_history_run(args: argparse.Namespace, reviewer_name: str) -> int:
    from .review.measure.history_eval import evaluate_history
    from .review.measure.history_mine import mine, pairs_from_file
    from .review.measure.local import GitError

    repo: Path = args.history
    try:
        if args.pairs is not None:
            listing = args.pairs.read_text(encoding="utf-8")
            mined = await pairs_from_file(
                repo, listing, tip=args.rev, limit=args.limit, window_days=args.window
            )
        else:
            mined = await mine(repo, tip=args.rev, limit=args.limit, window_days=args.window)
    except GitError as exc:
        print(f"revbot: --history: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    chosen = _eval_reviewer(reviewer_name)
    if chosen is None:
        return EXIT_CONFIG
    reviewer, label = chosen
    text = args.format == "text"
    try:
        report = await evaluate_history(
            repo,
            mined,
            reviewer,
            label=label,
            tip=args.rev,
            commits=args.commits,
            tolerance=args.tolerance,
            progress=(lambda line: print(line, flush=True)) if text else None,
        )
    finally:
        await reviewer.aclose()
    print(("\n" + report.report()) if text else report.as_json())
    return 0


def _eval_history(args: argparse.Namespace, reviewer_name: str) -> int:
    if not (args.history / ".git").exists() and not (args.history / "HEAD").is_file():
        print(f"revbot: --history: {args.history} is not a git repository", file=sys.stderr)
        return EXIT_CONFIG
    if args.pairs is not None and not args.pairs.is_file():
        print(f"revbot: --pairs: {args.pairs} is not a file", file=sys.stderr)
        return EXIT_CONFIG
    for option, value in (("--limit", args.limit), ("--window", args.window)):
        if value < 1:
            print(f"revbot: {option} expects a positive number", file=sys.stderr)
            return EXIT_CONFIG
    if args.commits < 0 or args.tolerance < 0:
        print("revbot: --commits and --tolerance expect a number of 0 or more", file=sys.stderr)
        return EXIT_CONFIG
    return asyncio.run(_eval_history_run(args, reviewer_name))


def _demo(args: argparse.Namespace) -> int:
    from .demo import DemoOptions, run_demo

    options = DemoOptions(scenario=args.scenario, approve=not args.no_approve, html=args.html)
    return run_demo(options)


def _replay(args: argparse.Namespace) -> int:
    from .replay import ReplayOptions, run_replay

    if not (args.dir / ".git").exists() and not (args.dir / "HEAD").is_file():
        print(f"revbot: {args.dir} is not a git repository", file=sys.stderr)
        return EXIT_CONFIG
    if args.merges < 1 or args.min_commits < 1:
        print("revbot: --merges and --min-commits expect a positive number", file=sys.stderr)
        return EXIT_CONFIG
    logging.basicConfig(level=logging.WARNING)
    options = ReplayOptions(
        clone=args.dir,
        merges=args.merges,
        pr=args.pr,
        min_commits=args.min_commits,
        html=args.html,
        output=args.format,
    )
    return asyncio.run(run_replay(options, os.environ))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app", description="revbot, a pull-request review GitHub App"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", help="run the webhook server and the worker").set_defaults(run=_serve)
    commands.add_parser("worker", help="run only the worker").set_defaults(run=_worker)
    doctor = commands.add_parser(
        "doctor",
        help="check settings, database, the App on GitHub, its webhook, deliveries and /metrics (read-only)",
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
    review = commands.add_parser(
        "review",
        help="print the review the bot would post (a GitHub PR, or a local git range) without posting",
    )
    review.add_argument("target", nargs="?", help="OWNER/REPO#NUMBER (reads GITHUB_TOKEN)")
    review.add_argument("--git", metavar="BASE..HEAD", help="review a local git range instead (no network)")
    review.add_argument("--repo", default=".", help="the local repository for --git (default: .)")
    review.add_argument(
        "--commits",
        type=int,
        metavar="N",
        help="review each of the last N first-parent commits of --repo (from --git REV, default HEAD), "
        "one line each, then totals",
    )
    review.add_argument("--format", choices=("text", "json"), default="text")
    review.set_defaults(run=_review)
    from .review.measure.evaluate import DEFAULT_CASES

    commands.add_parser("rules", help="list the rules the built-in reviewer reports").set_defaults(run=_rules)
    evaluation = commands.add_parser(
        "eval",
        help="measure a reviewer on a corpus of cases: recall, false blockers, tokens, time",
        description="Review every case (a base tree, a patch, the defects a good reviewer must find) "
        "and print recall, false blockers on clean changes, tokens and time per case.",
    )
    evaluation.add_argument("--cases", type=Path, default=DEFAULT_CASES, help="default: the shipped corpus")
    evaluation.add_argument("--format", choices=("text", "json"), default="text")
    evaluation.add_argument(
        "--reviewer", choices=("builtin", "llm"), help="default: the REVIEWER setting (builtin when unset)"
    )
    evaluation.add_argument(
        "--history",
        type=Path,
        metavar="DIR",
        help="measure recall on this git repository's own regressions (mined from its history) instead",
    )
    evaluation.add_argument("--pairs", type=Path, metavar="FILE", help="with --history: INTRO<TAB>FIX lines")
    evaluation.add_argument("--rev", default="HEAD", help="with --history: the newest commit (default: HEAD)")
    evaluation.add_argument(
        "--limit", type=int, default=40, help="with --history: at most N pairs (default: 40)"
    )
    evaluation.add_argument(
        "--window", type=int, default=365, help="with --history: blame back at most N days (default: 365)"
    )
    evaluation.add_argument(
        "--commits", type=int, default=50, help="with --history: ordinary commits for precision (default: 50)"
    )
    evaluation.add_argument(
        "--tolerance", type=int, default=3, help="with --history: lines a hit may be off by (default: 3)"
    )
    evaluation.set_defaults(run=_eval)
    learnings = commands.add_parser(
        "learnings",
        help="list the disputes remembered for a repository (what later reviews leave out)",
        description="List the repository's learnings from the database (DATABASE_URL), numbered; "
        "--forget N removes one, as @revbot forget N does.",
    )
    learnings.add_argument("--repo", required=True, help="OWNER/NAME")
    learnings.add_argument("--forget", type=int, metavar="N", help="remove learning N")
    learnings.set_defaults(run=_learnings)
    demo = commands.add_parser(
        "demo",
        help="play a story: the real bot against a sandbox GitHub, printed as a timeline",
        description="Start a sandbox GitHub and the real bot on 127.0.0.1 (SQLite in a temp dir, kept), "
        "play a story on a sample repository and print what every side did.",
    )
    demo.add_argument(
        "--scenario",
        choices=("story", "mention", "big-pr", "redelivery", "crash-recovery", "ready"),
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
    replay = commands.add_parser(
        "replay",
        help="play a clone's merged pull requests through the bot against a sandbox GitHub, and measure it",
        description="Take merged pull requests from DIR's merge commits (git log --merges --first-parent), "
        "open each in a sandbox GitHub at its first commit, request a review from the decoy, push the "
        "rest at their own times and merge; the real bot answers. Prints what it did, per PR and in total. "
        "Offline: nothing leaves 127.0.0.1.",
    )
    replay.add_argument("dir", type=Path, metavar="DIR", help="a local git clone")
    replay.add_argument(
        "--merges",
        type=int,
        default=20,
        metavar="N",
        help="the newest N merged PRs that qualify (default: 20)",
    )
    replay.add_argument("--pr", metavar="SHA", help="replay only the PR merged by this merge commit")
    replay.add_argument(
        "--min-commits",
        type=int,
        default=1,
        metavar="K",
        help="skip PRs of fewer than K commits (default: 1)",
    )
    replay.add_argument(
        "--html",
        type=Path,
        metavar="OUT",
        help="write the conversation of --pr's PR (or the last one) as HTML",
    )
    replay.add_argument("--format", choices=("text", "json"), default="text")
    replay.set_defaults(run=_replay)
    args = parser.parse_args(argv)
    if args.command in ("serve", "worker", "doctor", "learnings"):
        load_env_file(Path.cwd() / ".env")  # what ``setup`` wrote; real environment variables win
    result: int = args.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
