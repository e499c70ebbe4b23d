"""``python -m app replay`` end to end: a repository built here with git, three merged pull
requests whose figures are known (``tests/replay_repo.py``), replayed through the real bot
against the fake GitHub; every figure of the JSON is asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.__main__ import main
from app.replay.history import merged_pulls
from tests.replay_repo import START, build

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

ALICE_PR = {"blocks_dismissed": 0, "crashes": 0, "crash_messages": [], "reposted": 0, "outside_diff": 0}

EXPECTED = [
    {
        # The undefined name blocks; the helper added above moves it from line 5 to line 9 and
        # uses ``os``, so the unused-import nit is fixed (its thread resolved) and the blocker is
        # not posted again; it still stands at the merge.
        **ALICE_PR,
        "number": 1,
        "title": "Add the handler",
        "pushes": 2,
        "rounds": 2,
        "comments_per_round": [2, 0],
        "comments": 2,
        "blocks_raised": 2,
        "resolved_verified": 1,
        "flagged": 2,
        "fixed_by_author": 1,
        "blockers_at_merge": ["python/F821 at src/one.py:5"],
        "findings": [
            "python/F821 at src/one.py:5: present at merge",
            "python/F401 at src/one.py:1: fixed at merge",
        ],
        "readiness_updates": 2,
        "ready_calls": 0,
        # Both calls are "blocked by the bot's own review", which that review already says: the
        # check run carries them, the conversation hears nothing (readiness.comment: actionable).
        "readiness_comments": 0,
        "readiness_posts": 0,
    },
    {
        # Blocked, fixed by the next commit: the thread is resolved, the bot approves, and an
        # hour later readiness calls it merge-ready.
        **ALICE_PR,
        "number": 2,
        "title": "Add total",
        "pushes": 2,
        "rounds": 2,
        "comments_per_round": [1, 0],
        "comments": 1,
        "blocks_raised": 1,
        "resolved_verified": 1,
        "flagged": 1,
        "fixed_by_author": 1,
        "blockers_at_merge": [],
        "findings": ["python/F821 at src/two.py:2: fixed at merge"],
        "readiness_updates": 3,
        "ready_calls": 1,
        "readiness_comments": 1,  # blocked by the bot, waiting for the quiet window: only "looks ready"
        "readiness_posts": 1,
    },
    {
        # The base branch merged in (the fake sees the branch rewritten on a newer base): the
        # block is re-reviewed there, nothing posted twice, then fixed and approved.
        **ALICE_PR,
        "number": 3,
        "title": "Add area",
        "pushes": 3,
        "rounds": 3,
        "comments_per_round": [1, 0, 0],
        "comments": 1,
        "blocks_raised": 2,
        "resolved_verified": 1,
        "flagged": 1,
        "fixed_by_author": 1,
        "blockers_at_merge": [],
        "findings": ["python/F821 at src/three.py:2: fixed at merge"],
        "readiness_updates": 4,
        "ready_calls": 1,
        "readiness_comments": 1,  # two blocks by the bot and a wait say nothing; "looks ready" does
        "readiness_posts": 1,
    },
]
EXPECTED_TOTALS = {
    "prs": 3,
    "pushes": 7,
    "rounds": 7,
    "comments": 4,
    "reposted": 0,
    "outside_diff": 0,
    "blocks_raised": 5,
    "blocks_dismissed": 0,
    "resolved_verified": 3,
    "flagged": 4,
    "fixed_by_author": 3,
    "blockers_at_merge": 1,
    "readiness_updates": 9,
    "ready_calls": 2,
    "readiness_comments": 2,  # 9 before issue 29's noise budget: one per check-run update
    "readiness_posts": 2,
    "crashes": 0,
    "resolution_rate": 0.75,
    "comments_per_pr": 1.33,
    "readiness_comments_per_pr": 0.67,
}


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("replay") / "widgets"
    return path, build(path)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["replay", *args, "--format", "json"]) == 0
    data: dict[str, object] = json.loads(capsys.readouterr().out)
    return data


def test_three_merged_prs_replayed_through_the_bot_give_every_figure(
    clone: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, shas = clone
    data = run(capsys, str(path))
    prs = data["prs"]
    assert isinstance(prs, list)
    budget = [(entry.pop("api_calls"), entry.pop("api_counted")) for entry in prs]
    # Every PR spent some of the installation's budget, and a 304 is not counted (the exact
    # figures are the budget's, measured by bench/review_latency.py, not fixed here)
    assert all(0 < counted <= calls for calls, counted in budget), budget
    for entry in prs:
        assert isinstance(entry.pop("seconds"), float)
    assert prs == [{**e, "merge": shas[f"#{e['number']}"]} for e in EXPECTED]
    totals = data["totals"]
    assert isinstance(totals, dict)
    assert isinstance(totals.pop("seconds"), float)
    assert (totals.pop("api_calls"), totals.pop("api_counted")) == tuple(map(sum, zip(*budget, strict=True)))
    assert totals.pop("api_counted_per_pr") == round(sum(c for _, c in budget) / len(budget), 1)
    assert totals == EXPECTED_TOTALS


def test_one_pr_by_its_merge_commit_with_its_page(
    clone: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, shas = clone
    page = tmp_path / "pr.html"
    data = run(capsys, str(path), "--pr", shas["#2"][:10], "--html", str(page))
    prs = data["prs"]
    assert isinstance(prs, list) and [p["number"] for p in prs] == [2]
    text = page.read_text(encoding="utf-8")
    assert "Add total" in text and "Take the offset" in text  # the title, and the later push
    assert "revbot[bot]" in text and "F821" in text  # the bot's review, with its finding
    assert '<b>Review decision:</b> <span class="ok">Approved</span>' in text  # fixed, so approved
    assert "Rendered by <code>python -m app replay</code>" in text


async def test_merged_pulls_are_read_from_the_merge_commits(clone: tuple[Path, dict[str, str]]) -> None:
    path, shas = clone
    pulls = await merged_pulls(path, limit=10)
    assert [p.number for p in pulls] == [1, 2, 3]
    three = pulls[2]
    assert [p.sha for p in three.pushes] == [shas["3a"], shas["3b"], shas["3c"]]
    assert [p.base for p in three.pushes] == [shas["#2"], shas["main"], shas["main"]]  # merged in: it moved
    assert three.merged_at == START + 12 * 3600 and three.title == "Add area"
    assert [p.number for p in await merged_pulls(path, limit=10, min_commits=3)] == [3]
    assert [p.number for p in await merged_pulls(path, limit=1)] == [3]  # the newest
