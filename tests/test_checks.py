"""The bot's check runs (``app.usecases.checks``) against the fake GitHub over HTTP: what each step
of a run's life writes, and what GitHub then shows. Every request is checked against GitHub's
descriptions (``GitHubConformance``), so a payload GitHub would refuse fails here."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest

from app.github import calls as github
from app.github.app import AppClient
from app.github.auth import AppJWT
from app.github.client import GitHubClient, RetryLater
from app.review.core.model import Finding, ReviewResult, Severity, Verdict
from app.review.output import render
from app.review.rounds.overrule import Overrule
from app.sandbox import FakeGitHub
from app.sandbox.state import CheckRun
from app.settings.config import default_graphql_url
from app.usecases.bot import Bot
from app.usecases.checks import (
    CheckKind,
    Conclusion,
    Output,
    StartedRun,
    abandon_check_run,
    check_name,
    completed_or_abandoned,
    finish_check_run,
    hold_paused_head,
    recount_check_run,
    review_run,
    settle_check_run,
)
from tests.conformance import GitHubConformance, validate_response
from tests.recording_github import IDENTITY, make_bot

APP_ID = 31
REPO = "octo/widgets"
INSTALLATION = 5


def test_each_kind_is_named_from_the_identity() -> None:
    assert check_name(CheckKind.REVIEW, IDENTITY) == "revbot review"
    assert check_name(CheckKind.READINESS, IDENTITY) == "revbot readiness"


@dataclass
class Hub:
    fake: FakeGitHub
    gh: GitHubClient
    bot: Bot
    head: str

    def runs(self) -> list[CheckRun]:
        return list(self.fake.world.check_runs.values())

    def run(self, run_id: int) -> CheckRun:
        return self.fake.world.check_runs[run_id]

    def writes(self) -> list[tuple[str, str]]:
        return [
            (c.method, c.path) for c in self.fake.calls if c.method in ("POST", "PATCH") and c.auth == "token"
        ]


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    fake = FakeGitHub(
        app_id=APP_ID, app_slug=IDENTITY.slug, webhook_secret="s", validator=GitHubConformance()
    )
    fake.add_installation(INSTALLATION, "octo")
    fake.add_repo(REPO, installation_id=INSTALLATION)
    fake.push(REPO, "main", {"README.md": "# widgets\n"})
    head = fake.push(REPO, "feature", {"a.py": "x = 1\n"})
    fake.open_pull(REPO, head="feature", author="alice")
    await fake.start()
    try:
        async with aiohttp.ClientSession() as session:
            app = AppClient(session, app_jwt=AppJWT(APP_ID, fake.private_key_pem), api_url=fake.base_url)
            token = (await app.mint_installation_token(INSTALLATION)).token
            gh = GitHubClient(
                session,
                api_url=fake.base_url,
                graphql_url=default_graphql_url(fake.base_url),
                oauth_token=token,
            )
            yield Hub(fake, gh, make_bot(app_id=APP_ID), head)
        assert fake.problems == []
        for call in fake.calls:  # and every answer fits GitHub's description of it
            if call.path != "/graphql" and call.response is not None and 200 <= call.status < 300:
                assert validate_response(call.method, call.path, call.status, call.response) == [], call
    finally:
        await fake.stop()


async def begun(hub: Hub) -> int:
    """The bot's review run in progress on the head, as a review that began and did not finish
    (or an earlier version of the bot) leaves it."""
    return await hub.fake.start_check_run(REPO, hub.head, "revbot review", app=IDENTITY.slug)


def finding(line: int, severity: Severity = Severity.BLOCKER) -> Finding:
    return Finding("a.py", line, severity, "python/F821", "Undefined name.", f"fp-{line}")


def result(*findings: Finding) -> ReviewResult:
    return ReviewResult(Verdict.REQUEST_CHANGES if findings else Verdict.APPROVE, "", findings)


PLAN = render.ReviewPlan(
    event=Verdict.COMMENT, body="What I found.\n<!-- revbot:review {} -->", comments=(), inline=(), in_body=()
)


@pytest.mark.slow
async def test_a_review_run_with_nothing_pending_is_created_completed_in_one_request(hub: Hub) -> None:
    run = review_run(hub.bot, pr_number=1, head_sha=hub.head, runs=[])
    await finish_check_run(hub.gh, repo=REPO, run=run, result=result(finding(2)), plan=PLAN)
    assert hub.writes() == [("POST", f"/repos/{REPO}/check-runs")]
    [created] = hub.runs()
    assert run.id == created.id
    assert (created.name, created.status, created.conclusion, created.external_id) == (
        "revbot review",
        "completed",
        "failure",
        "1",
    )
    assert len(created.annotations) == 1


def test_a_retried_review_reuses_its_own_run_never_another_apps() -> None:
    bot = make_bot(app_id=APP_ID)
    runs = [
        {"id": 7, "name": "revbot review", "app": {"slug": "impostor", "id": APP_ID + 1}},
        {"id": 5, "name": "revbot review", "app": {"slug": IDENTITY.slug, "id": APP_ID}},
        {"id": 6, "name": "revbot readiness", "app": {"slug": IDENTITY.slug, "id": APP_ID}},
    ]
    assert review_run(bot, pr_number=1, head_sha="a" * 40, runs=runs) == StartedRun(id=5)
    assert review_run(bot, pr_number=1, head_sha="a" * 40, runs=runs[:1]).id is None


@pytest.mark.slow
async def test_finishing_sends_annotations_fifty_a_request_and_completes_with_the_last(hub: Hub) -> None:
    run_id = await begun(hub)
    started = StartedRun(id=run_id)
    found = result(*(finding(line) for line in range(1, 121)))
    await finish_check_run(hub.gh, repo=REPO, run=started, result=found, plan=PLAN, note="Bad settings.")
    patches = [
        c.body for c in hub.fake.calls if c.method == "PATCH" and c.path.endswith(f"/check-runs/{run_id}")
    ]
    assert [len(p["output"]["annotations"]) for p in patches] == [50, 50, 20]
    assert ["conclusion" in p for p in patches] == [False, False, True]
    run = hub.run(run_id)
    assert (run.status, run.conclusion, run.title) == ("completed", "failure", "120 blockers")
    assert run.summary == "Bad settings.\n\nWhat I found." and len(run.annotations) == 120


@pytest.mark.slow
async def test_a_review_without_findings_completes_in_one_request(hub: Hub) -> None:
    run_id = await begun(hub)
    started = StartedRun(id=run_id)
    before = len(hub.writes())
    await finish_check_run(hub.gh, repo=REPO, run=started, result=result(), plan=PLAN)
    assert len(hub.writes()) == before + 1
    run = hub.run(run_id)
    assert (run.conclusion, run.title, run.summary) == ("success", "No problems found", "What I found.")


@pytest.mark.slow
async def test_a_failed_review_completes_its_run_as_a_failure(hub: Hub) -> None:
    with pytest.raises(ValueError, match="boom"):
        async with completed_or_abandoned(hub.gh, repo=REPO) as started:
            started.id = await begun(hub)
            raise ValueError("boom")
    assert started.id is not None
    run = hub.run(started.id)
    assert (run.status, run.conclusion, run.title) == (
        "completed",
        "failure",
        "The review could not be completed",
    )


@pytest.mark.slow
async def test_a_run_waiting_for_rate_limits_or_completed_is_not_abandoned(hub: Hub) -> None:
    with pytest.raises(RetryLater):
        async with completed_or_abandoned(hub.gh, repo=REPO) as waiting:
            waiting.id = await begun(hub)
            raise RetryLater(60, "rate limited")
    assert waiting.id is not None and hub.run(waiting.id).status == "in_progress"  # its retry finishes it
    async with completed_or_abandoned(hub.gh, repo=REPO) as done:
        done.id = waiting.id
        await finish_check_run(hub.gh, repo=REPO, run=done, result=result(), plan=PLAN)
        done.completed = True
    assert hub.run(waiting.id).conclusion == "success"


@pytest.mark.slow
async def test_abandoning_never_raises_over_the_reviews_own_error(hub: Hub) -> None:
    await abandon_check_run(hub.gh, repo=REPO, run=StartedRun(id=999_999))  # GitHub answers 404: logged
    assert hub.runs() == []


@pytest.mark.slow
async def test_a_recount_edits_only_a_completed_review_run_and_only_once(hub: Hub) -> None:
    kept = result(finding(3, Severity.CONCERN))
    overruled = [Overrule("fp-2", "key", "python/F821", "a.py", 2, "blocker", by="maya", reason="", thread=1)]

    async def recount() -> None:
        await recount_check_run(
            hub.gh, hub.bot, repo=REPO, head_sha=hub.head, result=kept, overruled=overruled
        )

    await recount()  # no run yet
    run_id = await begun(hub)
    started = StartedRun(id=run_id)
    await recount()  # a review is writing it now
    writes = len(hub.writes())
    await finish_check_run(hub.gh, repo=REPO, run=started, result=result(finding(2), finding(3)), plan=PLAN)
    await recount()
    run = hub.run(run_id)
    assert (run.conclusion, run.title) == ("neutral", "1 concern")
    assert run.summary is not None and run.summary.startswith(
        "What I found.\n\n**Overruled since this review**:"
    )
    await recount()  # nothing new to count
    assert len(hub.writes()) == writes + 2  # the finish and one recount


@pytest.mark.slow
async def test_the_readiness_run_is_created_completed_and_edited_only_where_it_changed(hub: Hub) -> None:
    theirs = await hub.fake.start_check_run(REPO, hub.head, "revbot readiness", app="impostor")

    async def settle(conclusion: Conclusion, title: str) -> None:
        output = Output(title, "Details.", "<!-- revbot:readiness {} -->")
        await settle_check_run(
            hub.gh,
            hub.bot,
            kind=CheckKind.READINESS,
            repo=REPO,
            head_sha=hub.head,
            conclusion=conclusion,
            output=output,
            runs=await github.list_check_runs(hub.gh, repo=REPO, ref=hub.head),  # as a look reads them
        )

    await settle(Conclusion.NEUTRAL, "⏳ Waiting")
    [mine] = [r for r in hub.runs() if r.id != theirs]
    assert (mine.name, mine.status, mine.conclusion, mine.text) == (
        "revbot readiness",
        "completed",
        "neutral",
        "<!-- revbot:readiness {} -->",
    )
    writes = len(hub.writes())
    await settle(Conclusion.NEUTRAL, "⏳ Waiting")
    assert len(hub.writes()) == writes
    await settle(Conclusion.SUCCESS, "✅ Looks merge-ready")
    assert (mine.conclusion, mine.title) == ("success", "✅ Looks merge-ready")
    assert len(hub.writes()) == writes + 1 and hub.run(theirs).status == "in_progress"


@pytest.mark.slow
async def test_a_paused_head_holds_unless_a_review_already_completed_its_run(hub: Hub) -> None:
    async def hold() -> None:
        await hold_paused_head(
            hub.gh,
            hub.bot,
            repo=REPO,
            pr_number=1,
            head_sha=hub.head,
            by="maya",
            details_url="https://x.test/pr/1",
        )

    run_id = await begun(hub)
    await hold()  # a review of this head began and did not finish: the head is not vouched for
    run = hub.run(run_id)
    assert (run.conclusion, run.details_url) == ("action_required", "https://x.test/pr/1")
    assert run.title is not None and run.title.startswith("⏸ Paused by @maya")
    run.conclusion = "failure"  # as a review that completed it before the pause
    writes = len(hub.writes())
    await hold()
    assert len(hub.writes()) == writes and run.conclusion == "failure"


@pytest.mark.slow
async def test_a_paused_head_without_a_run_gets_one_that_names_the_pull_request(hub: Hub) -> None:
    await hold_paused_head(
        hub.gh, hub.bot, repo=REPO, pr_number=1, head_sha=hub.head, by="maya", details_url=""
    )
    [run] = hub.runs()
    assert (run.name, run.status, run.conclusion, run.external_id) == (
        "revbot review",
        "completed",
        "action_required",
        "1",
    )
