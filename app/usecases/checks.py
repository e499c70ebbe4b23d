"""The bot's check runs: one of each kind per head commit, named from the bot's identity.

A run is found again by its name and the App's id (another App's run of the same name is not
ours: GitHub refuses to update it), so a retried job reuses what an earlier attempt started.
The review's run is written when the review has something to say: created completed with its
findings as annotations in one request (the rest follow, 50 per request, as the Checks API
takes them; until then the request's 👀 says a review is under way), recounted after an
overrule that leaves the verdict, and completed as a failure when the review could not finish
(created so if need be); a paused pull request's head that no review vouches for gets
``action_required``. The readiness run is written completed in one request and edited only
where it changed.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from ..github import calls as github
from ..github.client import GitHubClient, RetryLater
from ..guards import BotIdentity
from ..review.core.model import ReviewResult
from ..review.output import checkrun, render
from ..review.rounds.overrule import Overrule
from .bot import Bot
from .pause import paused_headline

log = logging.getLogger(__name__)

ANNOTATIONS_PER_REQUEST = 50


class CheckKind(enum.StrEnum):
    """The bot's check runs; the value ends the run's name."""

    REVIEW = "review"  # ``Re-run`` on it asks for a review again
    READINESS = "readiness"


class Conclusion(enum.StrEnum):
    """The conclusions the bot gives its runs (the Checks API knows more)."""

    SUCCESS = "success"
    NEUTRAL = "neutral"
    FAILURE = "failure"
    ACTION_REQUIRED = "action_required"


def check_name(kind: CheckKind, identity: BotIdentity) -> str:
    return f"{identity.slug} {kind.value}"


@dataclass(frozen=True, slots=True)
class Output:
    """What a run shows. ``text``: the readiness run keeps its memory there (a marker); None
    leaves the run's text out of the request and out of the comparison."""

    title: str
    summary: str
    text: str | None = None

    def payload(self) -> dict[str, str]:
        fields = {"title": self.title, "summary": self.summary}
        if self.text is not None:
            fields["text"] = self.text
        return fields

    def shown_by(self, run: Mapping[str, Any], conclusion: Conclusion) -> bool:
        """``run`` already shows this output with this conclusion (no edit needed)."""
        shown = run.get("output") or {}
        return (
            run.get("conclusion") == conclusion.value
            and shown.get("title") == self.title
            and shown.get("summary") == self.summary
            and (self.text is None or shown.get("text") == self.text)
        )


async def bot_check_run(
    gh: GitHubClient, bot: Bot, *, kind: CheckKind, repo: str, head_sha: str
) -> dict[str, Any] | None:
    """The bot's latest run of ``kind`` on the commit, if there is one."""
    return await github.find_check_run(
        gh, repo=repo, head_sha=head_sha, name=check_name(kind, bot.identity), app_id=bot.settings.app_id
    )


def review_run(bot: Bot, *, pr_number: int, head_sha: str, runs: Sequence[Mapping[str, Any]]) -> StartedRun:
    """The review's run for this head: the bot's own among ``runs`` (the head's, as the review
    read them; a retried job's), else one to create when there is something to say.
    ``pr_number`` is its external id (forks' runs list no pull requests)."""
    found = own_run(runs, bot, kind=CheckKind.REVIEW)
    if found is not None:
        return StartedRun(id=int(found["id"]))
    name = check_name(CheckKind.REVIEW, bot.identity)
    return StartedRun(new={"name": name, "head_sha": head_sha, "external_id": str(pr_number)})


def own_run(runs: Sequence[Mapping[str, Any]], bot: Bot, *, kind: CheckKind) -> Mapping[str, Any] | None:
    """The bot's latest run of ``kind`` among ``runs`` (a head's, as read): by name and the App's
    id, since another App's run of the same name is not ours to edit."""
    name = check_name(kind, bot.identity)
    mine = [
        r for r in runs if r.get("name") == name and (r.get("app") or {}).get("id") == bot.settings.app_id
    ]
    return max(mine, key=lambda r: int(r.get("id") or 0), default=None)


async def complete_check_run(
    gh: GitHubClient,
    *,
    repo: str,
    run: StartedRun,
    conclusion: Conclusion,
    output: Output,
    annotations: Sequence[Mapping[str, Any]] = (),
    details_url: str | None = None,
) -> None:
    """Complete the run, creating it with the first request if it does not exist yet: in one
    request when its annotations fit in one (50, as the Checks API takes them), else the rest
    follow, and the last request completes it."""
    batches = [
        list(annotations[i : i + ANNOTATIONS_PER_REQUEST])
        for i in range(0, len(annotations), ANNOTATIONS_PER_REQUEST)
    ] or [[]]
    for index, batch in enumerate(batches):
        shown: dict[str, Any] = output.payload()
        payload: dict[str, Any] = {"output": {**shown, "annotations": batch} if batch else shown}
        if index == len(batches) - 1:
            payload.update(status="completed", conclusion=conclusion.value)
            if details_url:
                payload["details_url"] = details_url
        await write_run(gh, repo=repo, run=run, payload=payload)


async def write_run(gh: GitHubClient, *, repo: str, run: StartedRun, payload: dict[str, Any]) -> None:
    """Edit the run, or create it with ``payload`` (a run created unfinished is ``in_progress``)."""
    if run.id is not None:
        await github.update_check_run(gh, repo=repo, check_run_id=run.id, payload=payload)
        return
    if run.new is None:
        raise ValueError("a run to write needs its id or what creating it takes")
    created = await github.create_check_run(
        gh, repo=repo, payload={**run.new, "status": "in_progress", **payload}
    )
    run.id = int(created["id"])


async def abandon_check_run(gh: GitHubClient, *, repo: str, run: StartedRun) -> None:
    """Complete the run of a review that failed before it could (the error itself goes on: the
    job is retried or fails). A failure: no review vouches for this head."""
    output = Output(
        "The review could not be completed",
        "The review of this head failed before it could finish; ask again to retry.",
    )
    payload = {"status": "completed", "conclusion": Conclusion.FAILURE.value, "output": output.payload()}
    try:
        await write_run(gh, repo=repo, run=run, payload=payload)
    except Exception:  # the review's own error is the one raised
        log.exception("could not complete check run %s", run.id)


@dataclass(slots=True)
class StartedRun:
    """The run one job writes: its ``id`` once it exists, else what creating it takes
    (``new``: its name, head and external id), and whether the job completed it."""

    id: int | None = None
    completed: bool = False
    new: dict[str, Any] | None = None

    @property
    def started(self) -> bool:
        return self.id is not None or self.new is not None


@asynccontextmanager
async def completed_or_abandoned(gh: GitHubClient, *, repo: str) -> AsyncIterator[StartedRun]:
    """Whatever fails inside, a run started in it (``StartedRun.started``: found, or to be
    created) and not completed is completed as a failure (``abandon_check_run``; created so if
    it did not exist yet): it never stays ``in_progress``, and no head a failed review left
    lacks its failure. Except while the job waits for GitHub's rate limits (``RetryLater``,
    never a failed attempt): its retry finishes the run, and completing it now would be one
    more write against that limit."""
    run = StartedRun()
    waiting = False
    try:
        yield run
    except RetryLater:
        waiting = True
        raise
    finally:
        if run.started and not run.completed and not waiting:
            await abandon_check_run(gh, repo=repo, run=run)


async def settle_check_run(
    gh: GitHubClient,
    bot: Bot,
    *,
    kind: CheckKind,
    repo: str,
    head_sha: str,
    conclusion: Conclusion,
    output: Output,
    runs: Sequence[Mapping[str, Any]],
) -> None:
    """The head's run of ``kind`` shows this, completed: created so in one request, or edited
    only where it shows something else. ``runs``: the head's, as just read."""
    existing = own_run(runs, bot, kind=kind)
    if existing is None:
        payload = {
            "name": check_name(kind, bot.identity),
            "head_sha": head_sha,
            "status": "completed",
            "conclusion": conclusion.value,
            "output": output.payload(),
        }
        await github.create_check_run(gh, repo=repo, payload=payload)
    elif not output.shown_by(existing, conclusion):
        await github.update_check_run(
            gh,
            repo=repo,
            check_run_id=int(existing["id"]),
            payload={"status": "completed", "conclusion": conclusion.value, "output": output.payload()},
        )


# ------------------------------------------------------------------------- the review's run
def review_conclusion(result: ReviewResult, *, blockers_unconfirmed: bool = False) -> Conclusion:
    """``blockers_unconfirmed``: the re-review could not confirm an earlier blocker fixed."""
    return Conclusion(checkrun.check_conclusion(result, blockers_unconfirmed=blockers_unconfirmed))


async def finish_check_run(
    gh: GitHubClient,
    *,
    repo: str,
    run: StartedRun,
    result: ReviewResult,
    plan: render.ReviewPlan,
    note: str | None = None,
    details_url: str | None = None,
    blockers_unconfirmed: bool = False,
) -> None:
    """Complete the review's run with its findings. ``note`` (an unusable settings file) leads
    the summary, where the repository's people look; ``details_url`` (the pull request, where the
    review says what could not be analysed) goes with ``action_required``, as GitHub asks;
    ``blockers_unconfirmed``: an earlier blocker's file could not be judged (``failure``)."""
    summary = checkrun.check_summary(plan)
    if note is not None:
        summary = f"{note}\n\n{summary}"[: render.MAX_CHECK_TEXT]
    conclusion = review_conclusion(result, blockers_unconfirmed=blockers_unconfirmed)
    await complete_check_run(
        gh,
        repo=repo,
        run=run,
        conclusion=conclusion,
        output=Output(checkrun.check_title(result), summary),
        annotations=checkrun.check_annotations(result),
        details_url=details_url if conclusion is Conclusion.ACTION_REQUIRED else None,
    )


async def recount_check_run(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    head_sha: str,
    result: ReviewResult,
    overruled: Sequence[Overrule],
) -> None:
    """After an overrule that leaves the verdict: the head's review run counts it at once (title,
    conclusion, the overruled listed), not at the next review. Its annotations stay: GitHub only
    adds to them."""
    existing = await bot_check_run(gh, bot, kind=CheckKind.REVIEW, repo=repo, head_sha=head_sha)
    if existing is None or existing.get("status") != "completed":
        return  # none yet, or a review is writing it now and will count the overrule itself
    said = str((existing.get("output") or {}).get("summary") or "")
    output = Output(checkrun.check_title(result), render.recounted_summary(said, overruled))
    conclusion = review_conclusion(result)
    if output.shown_by(existing, conclusion):
        return
    await github.update_check_run(
        gh,
        repo=repo,
        check_run_id=int(existing["id"]),
        payload={"conclusion": conclusion.value, "output": output.payload()},
    )


async def hold_paused_head(
    gh: GitHubClient, bot: Bot, *, repo: str, pr_number: int, head_sha: str, by: str, details_url: str
) -> None:
    """Instead of a review: the head's review run says who paused the pull request. A head
    reviewed before the pause keeps its run as it is (pausing never changes a verdict); a head no
    review vouches for gets ``action_required``, which holds a merge where the check is
    required, as an unreviewed head should (``neutral`` would pass it)."""
    existing = await bot_check_run(gh, bot, kind=CheckKind.REVIEW, repo=repo, head_sha=head_sha)
    if existing is not None and existing.get("status") == "completed":
        return
    slug = bot.identity.slug
    output = Output(
        paused_headline(by, slug),
        f"@{by} paused me on this pull request, so this head is not reviewed. "
        f"Someone with write access can say `@{slug} resume`, then `@{slug} review`.",
    )
    payload: dict[str, Any] = {
        "status": "completed",
        "conclusion": Conclusion.ACTION_REQUIRED.value,
        "details_url": details_url,
        "output": output.payload(),
    }
    if existing is None:
        payload.update(
            name=check_name(CheckKind.REVIEW, bot.identity), head_sha=head_sha, external_id=str(pr_number)
        )
        await github.create_check_run(gh, repo=repo, payload=payload)
    else:
        await github.update_check_run(gh, repo=repo, check_run_id=int(existing["id"]), payload=payload)
