"""The readiness use case against a recording GitHub: what it reads, when it stays silent, what
it writes and when it asks to look again (table-driven, milliseconds)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from app.review.rounds.markers import decode
from app.usecases.readiness import decide as rd
from app.usecases.readiness import evaluate
from app.usecases.readiness.memory import Memory, remember_ci
from app.usecases.readiness.read import _rules, check_run_state, status_state
from app.usecases.readiness.render import quiet_text
from tests.recording_github import IDENTITY, REPO, RecordingGitHub, RecordingTimers, make_bot, repo_config

NOW = 1_800_000_000.0
HEAD = "a" * 40
ISO = "2027-01-15T08:00:00Z"  # after NOW: whatever happened counts as just now


def the_pull(**fields: Any) -> dict[str, Any]:
    return {
        "number": 1,
        "state": "open",
        "merged": False,
        "draft": False,
        "head": {"sha": HEAD},
        "base": {"ref": "main"},
        "user": {"login": "alice"},
        "requested_reviewers": [],
        "requested_teams": [],
        "mergeable": True,
        "mergeable_state": "clean",
        "created_at": ISO,
        "updated_at": ISO,
        **fields,
    }


BOT_REVIEW = {"user": {"login": "revbot[bot]"}, "state": "APPROVED", "commit_id": HEAD, "submitted_at": ISO}


def answers(
    *, pull: dict[str, Any], reviews: list[Any], config: str | None = None, statuses: Any = None
) -> Any:
    base = f"/repos/{REPO}"
    table: dict[tuple[str, str], Any] = {
        ("GET", f"{base}/pulls/1"): pull,
        ("GET", f"{base}/pulls/1/reviews"): reviews,
        **repo_config(config),
        # every App's check runs, and the search for the bot's own (the query string is ignored)
        ("GET", f"{base}/commits/{HEAD}/check-runs"): {"total_count": 0, "check_runs": []},
        ("GET", f"{base}/commits/{HEAD}/status"): statuses
        if statuses is not None
        else {"state": "pending", "statuses": [], "sha": HEAD, "total_count": 0},
        ("GET", f"{base}/rules/branches/main"): [],
        ("GET", f"{base}/branches/main"): {
            "name": "main",
            "protected": False,
            "protection": {"enabled": False},
        },
        ("GET", f"{base}/issues/1/comments"): [],
        ("GET", f"{base}/issues/1/reactions"): [],
        ("POST", f"{base}/issues/1/comments"): (201, {"id": 5}),
        ("POST", f"{base}/check-runs"): (201, {"id": 9}),
    }
    return table


async def run(table: Any, timers: RecordingTimers) -> tuple[RecordingGitHub, Any]:
    gh = RecordingGitHub(table)
    bot = make_bot(timers=timers)
    found = await evaluate(gh, bot, repo=REPO, pr_number=1, installation_id=7, since=NOW)
    return gh, found


@pytest.mark.parametrize(
    ("case", "pull", "reviews", "config"),
    [
        ("closed", the_pull(state="closed"), [BOT_REVIEW], None),
        ("merged", the_pull(state="closed", merged=True), [BOT_REVIEW], None),
        ("not reviewed by the bot", the_pull(), [], None),
        ("turned off", the_pull(), [BOT_REVIEW], "readiness:\n  enabled: false\n"),
        ("a draft", the_pull(draft=True), [BOT_REVIEW], None),
    ],
)
async def test_silent_where_it_does_not_follow(
    case: str, pull: Any, reviews: Any, config: str | None
) -> None:
    timers = RecordingTimers(NOW)
    gh, found = await run(answers(pull=pull, reviews=reviews, config=config), timers)
    assert found is None
    assert gh.writes() == []
    assert timers.asked == []


@pytest.mark.parametrize(
    ("config", "comments"),
    [
        (None, []),  # waiting needs nobody: the check run only (readiness.comment: actionable)
        ("readiness:\n  comment: always\n", [("POST", f"/repos/{REPO}/issues/1/comments")]),
        ("readiness:\n  comment: never\n", []),
    ],
)
async def test_a_followed_pull_gets_one_check_and_a_look_at_the_window_end(
    config: str | None, comments: list[tuple[str, str]]
) -> None:
    timers = RecordingTimers(NOW)
    gh, found = await run(answers(pull=the_pull(), reviews=[BOT_REVIEW], config=config), timers)
    assert found is not None and found.verdict.outcome == rd.Outcome.WAITING
    assert gh.writes() == [*comments, ("POST", f"/repos/{REPO}/check-runs")]
    [check] = [c for c in gh.calls if c.path.endswith("/check-runs") and c.method == "POST"]
    assert check.data["conclusion"] == "neutral" and check.data["name"] == "revbot readiness"
    [(repo, number, at)] = timers.asked
    assert (repo, number) == (REPO, 1) and at > NOW  # the end of the quiet window


async def test_mergeability_not_computed_yet_is_waited_for_and_looked_at_again_soon() -> None:
    timers = RecordingTimers(NOW)
    pull = the_pull(mergeable=None, mergeable_state="unknown")
    _, found = await run(
        answers(pull=pull, reviews=[BOT_REVIEW], config="readiness:\n  quiet_minutes: 0\n"), timers
    )
    assert found is not None
    assert found.verdict.headline == "⏳ Waiting — GitHub is still computing whether it merges cleanly"
    assert [at for *_, at in timers.asked] == [NOW + 5.0]  # READINESS_SETTLE_SECONDS


async def test_a_refused_read_names_the_permission() -> None:
    timers = RecordingTimers(NOW)
    table = answers(pull=the_pull(), reviews=[BOT_REVIEW])
    table[("GET", f"/repos/{REPO}/commits/{HEAD}/status")] = (
        403,
        {"message": "Resource not accessible by integration"},
    )
    _, found = await run(table, timers)
    assert found is not None and "commit statuses (statuses: read)" in found.verdict.headline


STRICT_RULESET = [
    {"type": "pull_request", "parameters": {"required_approving_review_count": 1}},
    {
        "type": "required_status_checks",
        "parameters": {
            "required_status_checks": [{"context": "build"}, {"context": "test"}],
            "strict_required_status_checks_policy": True,
        },
    },
]
LAX_RULESET = [
    {
        "type": "required_status_checks",
        "parameters": {"required_status_checks": [{"context": "test"}]},
    }
]
UNPROTECTED = {"name": "main", "protected": False, "protection": {"enabled": False}}


def protected(*contexts: str, level: str = "non_admins", **more: Any) -> dict[str, Any]:
    checks = {"enforcement_level": level, "contexts": list(contexts), "checks": [], **more}
    return {
        "name": "main",
        "protected": True,
        "protection": {"enabled": True, "required_status_checks": checks},
    }


@pytest.mark.parametrize(
    ("rulesets", "branch", "expected"),
    [
        pytest.param(None, None, rd.Rules(), id="neither readable: every check counts"),
        pytest.param([], UNPROTECTED, rd.Rules(known=True, strict=False), id="no rules at all"),
        pytest.param(
            STRICT_RULESET,
            None,
            rd.Rules(known=True, required_checks=frozenset({"build", "test"}), strict=True),
            id="a strict ruleset",
        ),
        pytest.param(
            LAX_RULESET,
            UNPROTECTED,
            rd.Rules(known=True, required_checks=frozenset({"test"}), strict=False),
            id="a lax ruleset",
        ),
        pytest.param(
            [],
            protected("ci/build"),
            rd.Rules(known=True, required_checks=frozenset({"ci/build"}), strict=None),
            id="classic protection: up to date not readable",
        ),
        pytest.param(
            None,
            protected("ci/build", strict=True),
            rd.Rules(known=True, required_checks=frozenset({"ci/build"}), strict=True),
            id="classic protection that says strict",
        ),
        pytest.param(
            LAX_RULESET,
            protected("ci/build", strict=False),
            rd.Rules(known=True, required_checks=frozenset({"ci/build", "test"}), strict=False),
            id="both, merged",
        ),
        pytest.param(
            STRICT_RULESET,
            protected("ci/build"),
            rd.Rules(known=True, required_checks=frozenset({"build", "test", "ci/build"}), strict=True),
            id="a strict ruleset wins over unreadable strictness",
        ),
        pytest.param(
            [],
            protected("ci/build", level="off"),
            rd.Rules(known=True, strict=False),
            id="classic protection with its checks switched off",
        ),
        pytest.param(
            None,
            {
                **protected(),
                "protection": {
                    "enabled": True,
                    "required_status_checks": {
                        "enforcement_level": "everyone",
                        "contexts": [],
                        "checks": [{"context": "lint", "app_id": 1}],
                    },
                },
            },
            rd.Rules(known=True, required_checks=frozenset({"lint"}), strict=None),
            id="classic protection naming a check by app",
        ),
    ],
)
def test_required_checks_and_strictness_from_rulesets_and_classic_protection(
    rulesets: list[dict[str, Any]] | None, branch: dict[str, Any] | None, expected: rd.Rules
) -> None:
    assert _rules(rulesets, branch) == expected


@pytest.mark.parametrize(
    ("status", "conclusion", "state"),
    [
        ("queued", None, rd.CheckState.PENDING),
        ("in_progress", None, rd.CheckState.PENDING),
        ("completed", "success", rd.CheckState.PASSED),
        ("completed", "neutral", rd.CheckState.PASSED),
        ("completed", "skipped", rd.CheckState.PASSED),
        ("completed", "failure", rd.CheckState.FAILED),
        ("completed", "timed_out", rd.CheckState.FAILED),
        ("completed", "cancelled", rd.CheckState.FAILED),
        ("completed", "action_required", rd.CheckState.FAILED),
        ("completed", None, rd.CheckState.FAILED),
    ],
)
def test_check_run_states(status: str, conclusion: str | None, state: rd.CheckState) -> None:
    assert check_run_state(status, conclusion) == state


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("success", rd.CheckState.PASSED),
        ("pending", rd.CheckState.PENDING),
        ("failure", rd.CheckState.FAILED),
        ("error", rd.CheckState.FAILED),
    ],
)
def test_status_states(state: str, expected: rd.CheckState) -> None:
    assert status_state(state) == expected


def test_the_marker_remembers_failures_and_when_ci_turned_green() -> None:
    memory = Memory(heads=[("h1", NOW)])
    snapshot = rd.Snapshot(
        head_sha="h1",
        base_ref="main",
        author="alice",
        draft=False,
        head_pushed_at=NOW,
        mergeable=True,
        mergeable_state=rd.MergeState.CLEAN,
        checks=(rd.Check("test", rd.CheckState.FAILED, "actions", NOW),),
    )
    remember_ci(memory, snapshot, rd.Settings(), NOW + 1)
    remember_ci(memory, snapshot, rd.Settings(), NOW + 2)  # the same failure is kept once
    assert memory.red == [("test", "h1", NOW + 1)] and memory.green_at is None
    memory.heads.append(("h2", NOW + 3))
    passed = replace(
        snapshot, head_sha="h2", checks=(rd.Check("test", rd.CheckState.PASSED, "actions", NOW + 4),)
    )
    remember_ci(memory, passed, rd.Settings(), NOW + 5)
    assert memory.green_at == NOW + 5
    restored = Memory.read(decode(memory.marker(), "readiness"))
    assert (restored.heads, restored.red, restored.green_at) == (memory.heads, memory.red, memory.green_at)


SPOKEN = f"✅ Looks merge-ready — earlier\n\n{Memory().marker()}"
QUIET_BODY = f"{quiet_text(IDENTITY)}\n\n{Memory(heads=[(HEAD, NOW)]).marker(quiet=True)}"
FAILING = {
    "total_count": 1,
    "check_runs": [
        {"id": 3, "name": "test", "status": "completed", "conclusion": "failure", "app": {"slug": "actions"}},
    ],
}


@pytest.mark.parametrize(
    ("case", "comment", "runs", "writes"),
    [
        ("a stated call no longer holds: said once", SPOKEN, None, ["quiet"]),
        ("already said: nothing more", QUIET_BODY, None, []),
        (
            "a failing check: the call itself",
            QUIET_BODY,
            FAILING,
            ["⛔ Blocked — failing check(s): `test`: fix them or re-run"],
        ),
    ],
)
async def test_the_sticky_comment_between_calls(
    case: str, comment: str, runs: Any, writes: list[str]
) -> None:
    """readiness.comment: actionable, with a comment the bot wrote earlier (its id 5)."""
    table = answers(pull=the_pull(), reviews=[BOT_REVIEW])
    table[("GET", f"/repos/{REPO}/issues/1/comments")] = [
        {"id": 5, "user": {"login": "revbot[bot]"}, "body": comment, "created_at": ISO, "updated_at": ISO}
    ]
    table[("PATCH", f"/repos/{REPO}/issues/comments/5")] = {"id": 5}
    if runs is not None:  # (the search for the bot's own run reads the same answer: the query is ignored)
        table[("GET", f"/repos/{REPO}/commits/{HEAD}/check-runs")] = runs
        table[("PATCH", f"/repos/{REPO}/check-runs/3")] = {"id": 3}
    gh, found = await run(table, RecordingTimers(NOW))
    assert found is not None
    edits = [c.data["body"] for c in gh.calls if c.method == "PATCH" and "/issues/comments/" in c.path]
    said = ["quiet" if body.startswith(quiet_text(IDENTITY)) else body.split("\n", 1)[0] for body in edits]
    assert said == writes
    assert not any(c.method == "POST" and c.path.endswith("/issues/1/comments") for c in gh.calls)
