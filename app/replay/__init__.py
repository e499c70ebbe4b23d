"""``python -m app replay DIR``: a clone's merged pull requests, played through the real bot.

Each merged pull request (``history``) is opened in the fake GitHub at its first push, reviewed
on a request to the decoy, pushed to commit by commit at its own times and merged (``play``), by
the bot ``serve`` runs: its worker, its use cases, the configured reviewer. What the bot did is
then read from the fake's record (``measure``): rounds, comments, re-posted findings, comments
outside the diff, blocks, threads resolved, findings the author fixed, blockers left at the
merge, readiness's writes and crashes, per pull request and in total. A maintainer sees what
the bot would have said on their own history before installing it; the project measures with
it whether reviews converge. Offline: the fake listens on loopback and serves the clone's blobs.

The serving code never imports it (an import contract says so); the CLI's ``replay`` does.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ..demo import html
from ..demo.harness import BOT
from .history import GitError, MergedPull, merged_pull, merged_pulls, resolve_commit
from .measure import PullReport, measure, totals
from .play import Replayer

__all__ = ["ReplayOptions", "replay", "run_replay"]

EXIT_USAGE = 2
EXIT_FAILED = 1


class ReplayError(RuntimeError):
    """The bot did not settle on a pull request (a hang): which one, and what was left."""


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    clone: Path
    merges: int = 20
    pr: str | None = None  # one merge commit to replay (``--pr``)
    min_commits: int = 1
    html: Path | None = None  # the page of ``--pr``'s PR, or of the last one replayed
    output: str = "text"
    workdir: Path | None = None


async def select(options: ReplayOptions) -> list[MergedPull]:
    if options.pr is not None:
        found = await merged_pull(options.clone, await resolve_commit(options.clone, options.pr))
        if found is None:
            raise GitError(
                f"{options.pr} is not the merge commit of a pull request (two parents, commits of its own)"
            )
        return [found]
    return await merged_pulls(options.clone, limit=options.merges, min_commits=options.min_commits)


def line(report: PullReport) -> str:
    number = f"#{report.number}" if report.number is not None else report.merge[:12]
    title = report.title if len(report.title) <= 50 else report.title[:49] + "\u2026"
    per_round = "+".join(map(str, report.comments_per_round)) or "0"
    return (
        f"{number:>8}  {report.pushes:3} push(es)  {report.rounds} round(s) [{per_round}]  "
        f"reposted {report.reposted}  outside {report.outside_diff}  "
        f"fixed {report.fixed_by_author}/{report.flagged}  "
        f"blockers at merge {len(report.blockers_at_merge)}  readiness {report.readiness_comments}  "
        f"crashes {report.crashes}  API calls {report.api_counted} counted of {report.api_calls}  "
        f"{report.seconds:5.1f}s  {title}"
    )


def summary(total: Mapping[str, object]) -> str:
    rate = total["resolution_rate"]
    rows = [
        ("pull requests", total["prs"]),
        ("pushes", total["pushes"]),
        ("review rounds", total["rounds"]),
        ("inline comments", f"{total['comments']} ({total['comments_per_pr']} per PR)"),
        ("re-posted findings", total["reposted"]),
        ("comments outside the diff", total["outside_diff"]),
        ("blocks raised / dismissed", f"{total['blocks_raised']} / {total['blocks_dismissed']}"),
        ("threads resolved as fixed", total["resolved_verified"]),
        (
            "fixed by the author",
            f"{total['fixed_by_author']} of {total['flagged']} findings"
            + (f" (resolution rate {rate:.0%})" if isinstance(rate, float) else ""),
        ),
        ("blockers standing at merge", total["blockers_at_merge"]),
        ("readiness check updates", f"{total['readiness_updates']} ({total['ready_calls']} 'looks ready')"),
        (
            "readiness comments",
            f"{total['readiness_comments']} ({total['readiness_comments_per_pr']} per PR; "
            f"{total['readiness_posts']} posted, the rest edits)",
        ),
        ("crashes", total["crashes"]),
        (
            "GitHub API calls",
            f"{total['api_calls']}, {total['api_counted']} counted against the rate limit "
            f"({total['api_counted_per_pr']} per PR)",
        ),
        ("time", f"{total['seconds']}s"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


async def replay(
    options: ReplayOptions, environ: Mapping[str, str], *, progress: TextIO | None = None
) -> tuple[list[PullReport], str | None]:
    """Replay the selected pull requests; their reports, and the HTML page when asked."""
    pulls = await select(options)
    if not pulls:
        return [], None
    reports: list[PullReport] = []
    page = None
    start = min(p.pushes[0].at for p in pulls) - 3600
    with tempfile.TemporaryDirectory(prefix="revbot-replay-") as scratch:  # the bot's database
        workdir = options.workdir or Path(scratch)
        async with Replayer(options.clone, workdir, start=start, environ=environ) as replayer:
            for pull in pulls:
                try:
                    played = await replayer.play(pull)
                except TimeoutError as exc:
                    raise ReplayError(f"replaying {pull.merge_sha[:12]} ({pull.title}): {exc}") from exc
                report = measure(replayer.fake, played)
                reports.append(report)
                if progress is not None:
                    print(line(report), file=progress, flush=True)
                if options.html is not None and pull is pulls[-1]:
                    page = html.render_pull(
                        replayer.fake,
                        played.repo,
                        played.number,
                        bot_login=BOT,
                        pushes=played.pushes,
                        command="python -m app replay",
                    )
    return reports, page


async def run_replay(options: ReplayOptions, environ: Mapping[str, str]) -> int:
    try:
        reports, page = await replay(
            options, environ, progress=sys.stdout if options.output == "text" else None
        )
    except GitError as exc:
        print(f"revbot: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ReplayError as exc:
        print(f"revbot: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if not reports:
        print(
            "revbot: no merged pull request to replay (merge commits on the first-parent line)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    total = totals(reports)
    if options.output == "json":
        print(json.dumps({"prs": [r.as_dict() for r in reports], "totals": total}, indent=2))
    else:
        print()
        print(summary(total))
    if options.html is not None and page is not None:
        options.html.write_text(page, encoding="utf-8")
    return 0
