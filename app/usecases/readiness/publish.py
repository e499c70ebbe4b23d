"""Saying it: the sticky comment and the readiness check run, edited in place, only where they
changed (the only writes of readiness besides its timers)."""

from __future__ import annotations

from ...github import calls as github
from ...github.client import GitHubClient
from ..bot import Bot
from ..checks import CheckKind, Conclusion, Output, settle_check_run
from . import decide as rd
from .read import Reading
from .render import quiet_text


async def publish(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    pr_number: int,
    verdict: rd.Verdict,
    reading: Reading,
    text: str,
    speak: bool = True,
) -> None:
    """Edit the sticky comment and the check run in place, only where they changed. ``speak``
    (``rd.speaks``): the call goes into the comment; otherwise a comment that stated an earlier
    call is edited once to say the check run has the current one, and none is created. The check
    run (``neutral`` while not ready, ``success`` when it looks ready, never ``failure``) carries
    every call and the bot's memory."""
    if speak:
        body = f"{text}\n\n{reading.memory.marker()}"
    else:
        body = f"{quiet_text(bot.identity)}\n\n{reading.memory.marker(quiet=True)}"
    if verdict.outcome is rd.Outcome.PAUSED:
        pass  # paused: not a word in the conversation, not even an edit
    elif speak and reading.comment is None:
        await github.create_issue_comment(gh, repo=repo, number=pr_number, body=body)
    elif (
        reading.comment is not None
        and (speak or not reading.comment_is_quiet)
        and reading.comment.get("body") != body
    ):
        await github.update_issue_comment(gh, repo=repo, comment_id=int(reading.comment["id"]), body=body)
    await settle_check_run(
        gh,
        bot,
        kind=CheckKind.READINESS,
        repo=repo,
        head_sha=reading.snapshot.head_sha,
        conclusion=Conclusion.SUCCESS if verdict.looks_ready else Conclusion.NEUTRAL,
        output=Output(verdict.headline[:250], text[:60000], reading.memory.marker()),
        runs=reading.runs,
    )
