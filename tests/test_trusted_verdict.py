"""An approval the pull request cannot earn by itself (issue 27, items 1 and 3), end to end through
``serve`` and the fake GitHub: the rules a pull request is judged by come from the base, an
incomplete analysis never approves (nor lets a re-review drop the block), and every way a
pull request can make the analysis fail still ends in a posted review and a completed check run."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest

from app.review.engine.builtin import BuiltinReviewer
from app.review.engine.ruffpins import RuffPins
from app.review.isolation.pool import pool_of
from app.sandbox import Call
from app.settings.config import load_analysis_settings
from tests.harness import REPO, BotHarness, harness_with_decoy

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AUTHOR = "alice"
DECOY = "revbot"
UNDEFINED = "def handler():\n    return undefined_thing + 1\n"
# Ruff overflows its stack on a long enough chain (exit -6 here from 20,000 terms, about 40 KB);
# Python's own parser gives up far earlier (5,000 terms: RecursionError).
STACK_OVERFLOW = "X = " + "+".join(["1"] * 20_000) + "\n"
DEEP_DEFAULT = "def total(x=" + "+".join(["1"] * 5_000) + "):\n    return x\n"


def reviews_posted(bot: BotHarness) -> list[Call]:
    return [
        c for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/reviews") and c.status == 200
    ]


def says(review: Call, note: str) -> bool:
    """Whether the review's text carries ``note`` (the summary starts its first note upper-case)."""
    return note.lower() in review.body["body"].lower()


def dismissals(bot: BotHarness) -> list[Call]:
    return [c for c in bot.fake.calls if c.method == "PUT" and c.path.endswith("/dismissals")]


def check_runs(bot: BotHarness) -> list[tuple[str, str | None]]:
    return [(run.status, run.conclusion) for run in bot.fake.world.check_runs.values()]


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[BotHarness]:
    async with harness_with_decoy(tmp_path, DECOY) as harness:
        yield harness


async def review(
    bot: BotHarness, head: Mapping[str, str | None], base: Mapping[str, str | None] | None = None
) -> Call:
    """Open a PR, ask for a review, and return the one review the bot posted."""
    number = bot.open_pull(head, base_files=base, author=AUTHOR)
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    [posted] = reviews_posted(bot)
    return posted


# --- the verdict's inputs come from the base ------------------------------------------------


async def test_a_pull_request_that_turns_off_every_rule_is_still_judged_by_the_bases(bot: BotHarness) -> None:
    posted = await review(
        bot,
        {"pyproject.toml": '[project]\nname = "x"\n\n[tool.ruff]\nselect = []\n', "src/app.py": UNDEFINED},
    )
    assert posted.body["event"] == "REQUEST_CHANGES"
    comments = {c["path"]: c["body"] for c in posted.body["comments"]}
    assert "python/F821" in comments["src/app.py"]
    assert "config/lint-rules-off" in comments["pyproject.toml"]
    assert "turns off ruff rules `E9`, `F` for the whole repository" in comments["pyproject.toml"]
    assert check_runs(bot) == [("completed", "failure")]


async def test_an_exclude_the_pull_request_adds_is_reported_and_not_applied(bot: BotHarness) -> None:
    base = {"pyproject.toml": '[tool.ruff.lint]\nselect = ["F"]\n'}
    head = {
        "pyproject.toml": '[tool.ruff]\nextend-exclude = ["src"]\n\n[tool.ruff.lint]\nselect = ["F"]\n',
        ".github/revbot.yml": "review:\n  paths_ignore: ['src/**']\n  approve: true\n",
        "src/app.py": UNDEFINED,
    }
    posted = await review(bot, head, base)
    assert posted.body["event"] == "REQUEST_CHANGES"
    comments = {c["path"]: c["body"] for c in posted.body["comments"]}
    assert "python/F821" in comments["src/app.py"]  # neither exclude applied
    assert "config/lint-excludes" in comments["pyproject.toml"] and "`src`" in comments["pyproject.toml"]
    settings = comments[".github/revbot.yml"]
    assert "config/bot-settings" in settings
    assert "adds skip patterns `src/**`" in settings and "turns approval on" in settings


# --- approval needs a complete analysis -------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "reason"),
    [
        ({"vendor/lib/x.py": "x = undefined\n"}, "vendored"),
        ({"api/proto/api_pb2.py": "x = undefined\n"}, "generated"),
        ({"src/gen.py": "# @generated\nx = undefined\n"}, "generated (its header says do not edit)"),
    ],
    ids=["vendored", "pb2", "at-generated"],
)
async def test_a_pull_request_of_only_skipped_files_is_not_approved(
    bot: BotHarness, head: dict[str, str | None], reason: str
) -> None:
    posted = await review(bot, head)
    assert posted.body["event"] == "COMMENT"
    body = posted.body["body"]
    assert "**Not approving:** not everything was analysed" in body
    assert f"{next(iter(head))}`: {reason}" in body
    assert bot.fake.review_decision(REPO, 1) is None
    assert check_runs(bot) == [("completed", "action_required")]  # neutral would pass a required check


@pytest.fixture(params=["approve", "no-approve"])
async def blocked(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[BotHarness, int]]:
    """A PR the bot blocked on an undefined name, with approval on or off."""
    env = {"REVIEW_APPROVE": "false"} if request.param == "no-approve" else {}
    harness = BotHarness(tmp_path, env=env)
    harness.fake.add_user(DECOY)
    number = harness.open_pull({"src/app.py": UNDEFINED}, author=AUTHOR)
    await harness.start()
    await harness.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await harness.drain()
    assert harness.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"
    yield harness, number
    await harness.stop()
    harness.assert_conforms()


async def test_a_re_review_that_crashes_ruff_keeps_the_block(blocked: tuple[BotHarness, int]) -> None:
    """The file that crashes ruff costs only its own findings: the blocker is still judged."""
    bot, number = blocked
    bot.fake.push(REPO, "feature", {"src/big.py": STACK_OVERFLOW})
    await bot.drain()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    last = reviews_posted(bot)[-1]
    assert last.body["event"] == "REQUEST_CHANGES"
    body = last.body["body"]
    assert "Ruff crashed on 1 of 2 files; the others were checked" in body
    assert "`src/big.py`: Python checks not run: ruff exited with status -" in body  # a signal
    assert "**Blockers still present**" in body and "**Verified fixed**" not in body
    assert dismissals(bot) == []
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"
    assert [t["is_resolved"] for t in bot.fake.threads(REPO, number)] == [False]  # not "verified fixed"


# --- every failure ends in an answer ---------------------------------------------------------


async def test_a_directory_named_like_a_ruff_config_ends_in_a_review_with_its_note(bot: BotHarness) -> None:
    posted = await review(bot, {".ruff.toml/evil.py": "x = 1\n", "src/app.py": "y = 2\n"})
    assert posted.body["event"] == "COMMENT"
    assert says(posted, "`.ruff.toml/evil.py`: Python checks not run: it is below a directory named like")
    assert check_runs(bot) == [("completed", "action_required")]


async def test_a_default_argument_too_deep_to_parse_ends_in_a_review_with_its_note(bot: BotHarness) -> None:
    base = {"src/lib.py": "def total(x=1):\n    return x\n"}
    posted = await review(bot, {"src/lib.py": DEEP_DEFAULT}, base)
    assert posted.body["event"] == "COMMENT"
    assert says(posted, "`src/lib.py`: API checks not run: it nests too deeply to parse (RecursionError)")
    assert check_runs(bot) == [("completed", "action_required")]


async def test_a_pinned_ruff_that_cannot_start_ends_in_a_review_with_its_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    versions = tmp_path / "ruffs"
    install = versions / "0.1.0"
    (install / "bin").mkdir(parents=True)
    # An installed pin that cannot be started (its interpreter is gone, as a broken install's is).
    ruff = install / "bin" / "ruff"
    ruff.write_text(f"#!{tmp_path / 'gone' / 'python'}\n")
    ruff.chmod(0o755)
    monkeypatch.setenv("REVIEW_RUFF_VERSIONS", str(versions))
    harness = BotHarness(tmp_path)
    harness.fake.add_user(DECOY)
    base = {
        "pyproject.toml": '[dependency-groups]\ndev = ["ruff==0.1.0"]\n\n[tool.ruff.lint]\nselect = ["F"]\n'
    }
    settings = load_analysis_settings()
    pool = pool_of(settings)  # the pins readable in the child: this process's pool may predate them
    number = harness.open_pull({"src/app.py": "y = 2\n"}, base_files=base, author=AUTHOR)
    try:
        await harness.start()
        assert harness.runtime is not None
        harness.runtime.reviewer = BuiltinReviewer(boundary=pool, ruff_pins=RuffPins(versions))
        await harness.fake.request_review(REPO, number, DECOY, by=AUTHOR)
        await harness.drain()
        [posted] = reviews_posted(harness)
    finally:
        await harness.stop()
        pool.close()
    assert posted.body["event"] == "COMMENT"
    assert says(posted, "the python checks failed (RuffUnavailableError); they were not run")
    assert check_runs(harness) == [("completed", "action_required")]
    harness.assert_conforms()


async def test_a_review_that_fails_completes_its_check_run(bot: BotHarness) -> None:
    number = bot.open_pull({"src/app.py": "y = 2\n"}, author=AUTHOR)
    await bot.start()
    # GitHub refuses the review, on every attempt of the job.
    bot.fake.fail_next("POST", rf"/repos/{REPO}/pulls/{number}/reviews", status=422, times=10)
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    assert reviews_posted(bot) == []
    [run] = bot.fake.world.check_runs.values()
    assert (run.status, run.conclusion, run.title) == (
        "completed",
        "failure",
        "The review could not be completed",
    )
