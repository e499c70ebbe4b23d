"""The bot against a sandbox GitHub: ``demo`` (a story) and ``replay`` (a clone's merged pull requests)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .common import EXIT_CONFIG

if TYPE_CHECKING:
    from .common import Commands


def _demo(args: argparse.Namespace) -> int:
    from ..demo import DemoOptions, run_demo

    options = DemoOptions(scenario=args.scenario, approve=not args.no_approve, html=args.html)
    return run_demo(options)


def _replay(args: argparse.Namespace) -> int:
    from ..replay import ReplayOptions, run_replay

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


def add_commands(commands: Commands) -> None:
    """demo, replay"""
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
    replay.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: a line per PR, then totals; json: the same",
    )
    replay.set_defaults(run=_replay)
