"""Follow a pull request to the end: say, in one place, whether it looks ready to merge.

Every evaluation re-reads GitHub (``read``: the pull request, every App's check runs and the
commit statuses at its head, reviews, threads, comments and the settings in one GraphQL request;
the branch rules and reactions),
decides (``readiness.decide``), and updates in place one sticky comment (found again by
its hidden marker) and one check run ``<slug> readiness`` (``publish``; ``neutral`` while not
ready, ``success`` when it looks ready, never ``failure``). The check run carries every call;
the comment only those ``readiness.comment`` lets through (``rd.speaks``). It never merges.

What the bot remembers between evaluations lives in its markers (``memory``: the heads it saw
and when, the checks it saw fail and when CI turned green): in the output of each head's check
run, and in the comment when it speaks, so the recap (``render``) is built from GitHub's record
and the bot's own markers, never from the process's memory. A head first looked at while the
comment was silent starts from the comment's last memory (GitHub lists no earlier heads to read
it from). When time alone can change the answer (the quiet window, a review still in flight,
GitHub still computing mergeability), the next look is a durable timer (``bot.timers``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ...github import calls as github
from ...github import pullstate
from ...github.client import GitHubClient
from ...guards import is_bot_login
from ..bot import Bot
from ..pause import paused_headline
from ..pull import settings_path
from . import decide as rd
from .memory import remember_ci
from .publish import publish
from .read import epoch, read_state, settings_of
from .render import render

log = logging.getLogger(__name__)

DRAFT_AGAIN = rd.Verdict(
    rd.Outcome.WAITING,
    rd.HEADLINE_PREFIX[rd.Outcome.WAITING] + "it is a draft again: I look again once it is ready for review",
    (),
)


async def settle_soon(
    bot: Bot, *, repo: str, pr_number: int, installation_id: int | None, received_at: float
) -> None:
    """Something happened on the pull request: look at it once its burst of events settled."""
    if installation_id is None:
        return
    await bot.timers.look_again(
        repo=repo,
        pr_number=pr_number,
        installation_id=installation_id,
        at=received_at + bot.settings.readiness_settle_seconds,
        since=received_at,
    )


async def settle_commit(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    sha: str | None,
    numbers: tuple[int, ...],
    installation_id: int,
    received_at: float,
) -> None:
    """CI moved on a commit: look at the open pull requests whose head it is (a fork's pull
    requests are not listed in the event, so those are found by their head)."""
    if not numbers and sha:
        pulls = await github.list_open_pulls(gh, repo=repo)
        numbers = tuple(int(p["number"]) for p in pulls if (p.get("head") or {}).get("sha") == sha)
    for number in numbers:
        await settle_soon(
            bot, repo=repo, pr_number=number, installation_id=installation_id, received_at=received_at
        )


@dataclass(frozen=True, slots=True)
class Evaluation:
    verdict: rd.Verdict
    text: str


async def evaluate(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    pr_number: int,
    installation_id: int,
    since: float | None,
    asked: bool = False,
) -> Evaluation | None:
    """Decide and say it. None: closed, merged, not followed (unless ``asked``), or a draft the
    repository does not follow. ``since``: when the cause arrived (None: asked by a person; a
    head the bot has not seen yet then counts from the pull request's last update)."""
    now = bot.timers.now()
    path = settings_path(bot.identity.slug)
    state = await pullstate.read_pull_state(gh, repo=repo, pr_number=pr_number, settings_path=path)
    pull = state.pull
    if pull.get("state") != "open" or pull.get("merged"):
        return None
    if since is None:
        since = min(now, epoch(pull.get("updated_at")) or now)
    found = state.settings
    config = bot.repo_configs.loaded(repo, path=path, source=found.source, text=found.text).config.readiness
    reviewed = any(is_bot_login((r.get("user") or {}).get("login"), bot.identity) for r in state.reviews)
    followed = config.enabled if config.enabled is not None else reviewed
    if not followed and not asked:
        return None
    settings = settings_of(config)
    reading = await read_state(gh, bot, repo=repo, state=state, since=since)
    if reading.paused_by is not None:
        verdict: rd.Verdict | None = rd.Verdict(
            rd.Outcome.PAUSED, paused_headline(reading.paused_by, bot.identity.slug), ()
        )
    else:
        verdict = rd.decide(reading.snapshot, settings, now=now)
    if verdict is None and reading.comment is not None:
        verdict = DRAFT_AGAIN  # a call said before must not stand while it is a draft
    if verdict is None:
        return None
    remember_ci(reading.memory, reading.snapshot, settings, now)
    text = render(verdict, reading, bot.identity.slug, now)
    if followed:
        speak = rd.speaks(verdict, settings.comment)
        await publish(
            gh, bot, repo=repo, pr_number=pr_number, verdict=verdict, reading=reading, text=text, speak=speak
        )
        if verdict.outcome is rd.Outcome.PAUSED:
            log.info("readiness paused by %s", reading.paused_by)
            return Evaluation(verdict, text)  # resuming asks for the next look
        again = verdict.look_again_at
        if again is None and reading.snapshot.mergeable is None:
            again = now + bot.settings.readiness_settle_seconds  # GitHub computes it after a read
        if again is not None:
            await bot.timers.look_again(
                repo=repo, pr_number=pr_number, installation_id=installation_id, at=again, since=since
            )
    log.info("readiness %s", verdict.outcome.value)
    return Evaluation(verdict, text)
