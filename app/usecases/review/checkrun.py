"""The review's check run: started (or, on a retried job, reused) for the head, completed with
the verdict and its annotations, recounted after an overrule, and completed as a failure when
the review could not finish."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ... import github
from ...github import GitHubClient
from ...guards import BotIdentity
from ...review import render
from ...review.model import ReviewResult
from ...review.overrule import Overrule
from ..bot import Bot

log = logging.getLogger(__name__)

ANNOTATIONS_PER_REQUEST = 50


def check_name(identity: BotIdentity) -> str:
    """The name of the bot's check run (``Re-run`` on it asks for a review again)."""
    return f"{identity.slug} review"


async def start_check_run(gh: GitHubClient, bot: Bot, *, repo: str, pr_number: int, head_sha: str) -> int:
    """The bot's check run for this head: reused if it exists (a retried job), else created."""
    name = check_name(bot.identity)
    existing = await github.find_check_run(
        gh, repo=repo, head_sha=head_sha, name=name, app_id=bot.settings.app_id
    )
    if existing is not None:
        await github.update_check_run(
            gh, repo=repo, check_run_id=int(existing["id"]), payload={"status": "in_progress"}
        )
        return int(existing["id"])
    created = await github.create_check_run(
        gh,
        repo=repo,
        payload={"name": name, "head_sha": head_sha, "status": "in_progress", "external_id": str(pr_number)},
    )
    return int(created["id"])


async def recount_check_run(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    head_sha: str,
    result: ReviewResult,
    overruled: Sequence[Overrule],
) -> None:
    """After an overrule that leaves the verdict: the head's check run counts it at once (title,
    conclusion, the overruled listed), not at the next review. Its annotations stay: GitHub only
    adds to them."""
    existing = await github.find_check_run(
        gh, repo=repo, head_sha=head_sha, name=check_name(bot.identity), app_id=bot.settings.app_id
    )
    if existing is None or existing.get("status") != "completed":
        return  # none yet, or a review is writing it now and will count the overrule itself
    shown = existing.get("output") or {}
    output = {
        "title": render.check_title(result),
        "summary": render.recounted_summary(str(shown.get("summary") or ""), overruled),
    }
    conclusion = render.check_conclusion(result)
    if (existing.get("conclusion"), shown.get("title"), shown.get("summary")) == (
        conclusion,
        output["title"],
        output["summary"],
    ):
        return
    await github.update_check_run(
        gh, repo=repo, check_run_id=int(existing["id"]), payload={"conclusion": conclusion, "output": output}
    )


async def abandon_check_run(gh: GitHubClient, *, repo: str, check_run_id: int) -> None:
    """Complete the check run of a review that failed before it could (the error itself goes
    on: the job is retried or fails). A failure: no review vouches for this head."""
    output = {
        "title": "The review could not be completed",
        "summary": "The review of this head failed before it could finish; ask again to retry.",
    }
    try:
        await github.update_check_run(
            gh,
            repo=repo,
            check_run_id=check_run_id,
            payload={"status": "completed", "conclusion": "failure", "output": output},
        )
    except Exception:  # the review's own error is the one raised
        log.exception("could not complete check run %s", check_run_id)


async def finish_check_run(
    gh: GitHubClient,
    *,
    repo: str,
    check_run_id: int,
    result: ReviewResult,
    plan: render.ReviewPlan,
    note: str | None = None,
) -> None:
    """Complete the check run; annotations go 50 per request, as the Checks API requires.
    ``note`` (an unusable settings file) leads the summary, where the repository's people look."""
    summary = render.check_summary(plan)
    if note is not None:
        summary = f"{note}\n\n{summary}"[: render.MAX_CHECK_TEXT]
    output = {"title": render.check_title(result), "summary": summary}
    notes = render.check_annotations(result)
    batches = [
        notes[i : i + ANNOTATIONS_PER_REQUEST] for i in range(0, len(notes), ANNOTATIONS_PER_REQUEST)
    ] or [[]]
    for index, batch in enumerate(batches):
        payload: dict[str, Any] = {"output": {**output, "annotations": batch} if batch else output}
        if index == len(batches) - 1:
            payload.update(status="completed", conclusion=render.check_conclusion(result))
        await github.update_check_run(gh, repo=repo, check_run_id=check_run_id, payload=payload)
