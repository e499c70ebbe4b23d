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
from collections.abc import Sequence
from pathlib import Path

from .cli import play, reviewing, service
from .cli.terminal import printable_output
from .settings.config import load_env_file


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app", description="revbot, a pull-request review GitHub App"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for group in (service, reviewing, play):
        group.add_commands(commands)
    args = parser.parse_args(argv)
    if args.command in ("serve", "worker", "doctor", "learnings"):
        load_env_file(Path.cwd() / ".env")  # what ``setup`` wrote; real environment variables win
    if args.command in ("serve", "worker"):  # they log (to stderr, redacted) and print nothing
        served: int = args.run(args)
        return served
    with printable_output():  # what a repository or pull request wrote reaches a terminal
        result: int = args.run(args)
    return result


if __name__ == "__main__":
    import sys

    sys.exit(main())
