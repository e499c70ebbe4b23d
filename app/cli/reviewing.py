"""The reviewer on the command line: ``review`` (a pull request, a local range, a history),
``rules``, ``eval`` and ``learnings``; a review is the bot's own pipeline (``app.offline``)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
import gidgethub

from ..settings.config import ConfigError
from .common import EXIT_CONFIG, EXIT_RUNTIME, reviewer_settings

if TYPE_CHECKING:
    from ..review.core.model import Reviewer
    from ..review.measure.evaluate import Case
    from ..usecases.review.publish import RecordingPublisher
    from .common import Commands


def _print_review(published: RecordingPublisher, *, label: str, output: str) -> int:
    """What the bot would post (``--format json``: the event, body and comments it posts)."""
    from ..review.output.report import as_json, as_text

    plan, review = published.plan, published.review
    if output == "json":
        print(
            as_json(
                plan.result if plan else None,
                head_sha=plan.state.context.head_sha if plan else None,
                review=review,
                said=published.said,
            )
        )
    elif plan is None:
        print("\n".join(published.said))
    else:
        print(as_text(plan.result, label=label, head_sha=plan.state.context.head_sha))
        if review is None:
            print("\n" + "\n".join(published.said))
        else:
            print(f"\nWould post a {review.event} review with {len(review.comments)} inline comment(s):\n")
            print(review.body)
    return 0


async def _review_remote(target: str, output: str) -> int:
    """Print the review the bot would post on a real PR, without posting anything."""
    from ..github.client import GitHubClient
    from ..offline import offline
    from ..settings.config import default_graphql_url

    match = re.fullmatch(r"([\w.-]+/[\w.-]+)#(\d+)", target)
    if match is None:
        print(f"revbot: expected OWNER/REPO#NUMBER, got {target!r}", file=sys.stderr)
        return EXIT_CONFIG
    token = os.environ.get("GITHUB_TOKEN", "").strip()
    if not token:
        print("revbot: GITHUB_TOKEN: is required to read the pull request", file=sys.stderr)
        return EXIT_CONFIG
    settings = reviewer_settings()
    if settings is None:
        return EXIT_CONFIG
    api_url = os.environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
    graphql_url = os.environ.get("GITHUB_GRAPHQL_URL") or default_graphql_url(api_url)
    repo, number = match.group(1), int(match.group(2))
    try:
        async with (
            offline(settings) as bot,
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session,
        ):
            gh = GitHubClient(session, api_url=api_url, graphql_url=graphql_url, oauth_token=token)
            published = await bot.pull_request(gh, repo=repo, pr_number=number)
    except (gidgethub.GitHubException, aiohttp.ClientError) as exc:  # one line, not a traceback
        print(f"revbot: reading {target} from GitHub failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    return _print_review(published, label=target, output=output)


async def _review_local(revisions: str, repo_path: str, output: str) -> int:
    from ..offline import offline
    from ..review.core.model import Verdict
    from ..review.measure.local import GitError

    base, dots, head = revisions.partition("..")
    if not dots or not base or not head.lstrip("."):
        print(f"revbot: --git expects BASE..HEAD, got {revisions!r}", file=sys.stderr)
        return EXIT_CONFIG
    settings = reviewer_settings()
    if settings is None:
        return EXIT_CONFIG
    try:
        async with offline(settings) as bot:
            published = await bot.git_range(Path(repo_path), base=base, tip=head.lstrip("."))
    except GitError as exc:
        print(f"revbot: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    _print_review(published, label=revisions, output=output)
    # Usable as a pre-commit hook or CI step: blockers fail it.
    plan = published.plan
    return 1 if plan is not None and plan.result.verdict is Verdict.REQUEST_CHANGES else 0


async def _review_history(tip: str, count: int, repo_path: str, output: str) -> int:
    import json

    from ..offline import offline
    from ..review.engine.builtin import BuiltinReviewer
    from ..review.measure.history import History, review_commits
    from ..review.measure.local import GitError

    settings = reviewer_settings()
    if settings is None:
        return EXIT_CONFIG
    history = History()
    try:
        # The built-in reviewer on every commit (no model spend), through the bot's pipeline.
        async with offline(settings, reviewer=BuiltinReviewer()) as bot:
            async for review in review_commits(
                Path(repo_path), tip=tip, count=count, review=bot.review_range
            ):
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
    from ..settings.config import load_analysis_settings

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
    from ..review.engine.rules import rules_markdown

    print(rules_markdown(), end="")
    return 0


def _eval_reviewer(reviewer_name: str) -> tuple[Reviewer, str] | None:
    """The reviewer ``eval`` measures and its label; None after a configuration error (said)."""
    from ..review.engine.builtin import BuiltinReviewer
    from ..settings.config import load_llm_settings

    if reviewer_name != "llm":
        return BuiltinReviewer(), "builtin"
    from ..review.llm import build_reviewer

    try:
        settings = load_llm_settings()
    except ConfigError as exc:
        print(f"revbot: configuration error: {exc}", file=sys.stderr)
        return None
    return build_reviewer(settings), f"llm ({settings.llm_provider} {settings.llm_model})"


async def _eval_run(reviewer_name: str, cases: Sequence[Case], output: str) -> int:
    from ..offline import offline
    from ..review.measure.evaluate import evaluate

    settings = reviewer_settings()
    chosen = _eval_reviewer(reviewer_name)
    if settings is None or chosen is None:
        return EXIT_CONFIG
    reviewer, label = chosen
    async with offline(settings, reviewer=reviewer) as bot:
        report = await evaluate(cases, reviewer, label=label, review=bot.review_range)
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
    from ..review.measure.evaluate import load_cases

    if not args.cases.is_dir():
        print(f"revbot: --cases: {args.cases} is not a directory", file=sys.stderr)
        return EXIT_CONFIG
    cases = load_cases(args.cases)
    if not cases:
        print(f"revbot: --cases: no case.yaml under {args.cases}", file=sys.stderr)
        return EXIT_CONFIG
    return asyncio.run(_eval_run(name, cases, args.format))


async def _eval_history_run(args: argparse.Namespace, reviewer_name: str) -> int:
    from ..offline import offline
    from ..review.measure.history_eval import evaluate_history
    from ..review.measure.history_mine import mine, pairs_from_file
    from ..review.measure.local import GitError

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
    settings = reviewer_settings()
    chosen = _eval_reviewer(reviewer_name)
    if settings is None or chosen is None:
        return EXIT_CONFIG
    reviewer, label = chosen
    text = args.format == "text"
    async with offline(settings, reviewer=reviewer) as bot:  # closes the reviewer
        report = await evaluate_history(
            repo,
            mined,
            reviewer,
            review=bot.review_range,
            label=label,
            tip=args.rev,
            commits=args.commits,
            tolerance=args.tolerance,
            progress=(lambda line: print(line, flush=True)) if text else None,
        )
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


async def _learnings_run(url: str, repo: str, forget: int | None) -> int:
    from ..store import Store
    from ..usecases.learnings import DatabaseLearnings

    store = Store(url)
    try:
        await store.create_schema()
        learnings = DatabaseLearnings(store.backend)
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
    from ..settings.dburl import BadDatabaseUrl, sqlalchemy_url

    if re.fullmatch(r"[\w.-]+/[\w.-]+", args.repo) is None:
        print(f"revbot: --repo expects OWNER/NAME, got {args.repo!r}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        url = sqlalchemy_url(os.environ.get("DATABASE_URL", "").strip() or None)
    except BadDatabaseUrl as exc:
        print(f"revbot: configuration error: DATABASE_URL: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return asyncio.run(_learnings_run(url, args.repo, args.forget))


def add_commands(commands: Commands) -> None:
    """review, rules, eval, learnings"""
    review = commands.add_parser(
        "review",
        help="print the review the bot would post (a GitHub PR, or a local git range) without posting",
        description="Print the review the bot would post, without posting anything: for a pull request "
        "on GitHub (OWNER/REPO#NUMBER, read with GITHUB_TOKEN), for a local git range (--git BASE..HEAD, "
        "no network), or for each of the last N commits of a local repository (--commits N).",
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
    review.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: the review as a person reads it (default); json: the event, body and comments it posts",
    )
    review.set_defaults(run=_review)
    from ..review.measure.evaluate import DEFAULT_CASES

    commands.add_parser("rules", help="list the rules the built-in reviewer reports").set_defaults(run=_rules)
    evaluation = commands.add_parser(
        "eval",
        help="measure a reviewer on a corpus of cases: recall, false blockers, tokens, time",
        description="Review every case (a base tree, a patch, the defects a good reviewer must find) "
        "and print recall, false blockers on clean changes, tokens and time per case.",
    )
    evaluation.add_argument("--cases", type=Path, default=DEFAULT_CASES, help="default: the shipped corpus")
    evaluation.add_argument("--format", choices=("text", "json"), default="text", help="default: text")
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
