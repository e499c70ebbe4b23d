"""A decision withdraws what it saw (issue 36, rows 2, 3 and 6): an overrule or a learning
withdraws only findings of at most the severity it was recorded for, and a finding's identity
is its evidence (the expression, the ref checked out, the secret's digest), never a message
that reads the same for every finding of its rule."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.sandbox import Call
from tests.harness import REPO, BotHarness, bot_thread_of
from tests.test_disputes import AUTHOR, MAINTAINER, open_and_review, reviews_posted, start
from tests.test_review_linters import COMPOSITE, PWN
from tests.test_review_secrets import UPPER_DIGITS, j, rand

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

WORKFLOW = ".github/workflows/label.yml"
# The same trigger and a checkout of the base: a concern, on the line the pwn request's blocker is.
HARMLESS = PWN.replace("          ref: ${{ github.event.pull_request.head.sha }}\n", "")
ACTION = ".github/actions/hello/action.yml"
INPUT_ONLY = COMPOSITE.replace("github.event.issue.title", "inputs.greeting").replace(
    "description: says hello\n",
    "description: says hello\ninputs:\n  greeting:\n    description: what to say\n",
)
TITLE = (
    "name: ci\non: pull_request\npermissions: {}\njobs:\n  greet:\n    runs-on: ubuntu-latest\n"
    '    steps:\n      - run: echo "${{ github.event.pull_request.title }}"\n'
)


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[BotHarness]:
    harness = await start(tmp_path)
    yield harness
    await harness.stop()
    harness.assert_conforms()


def inline(review: Call, rule: str) -> list[str]:
    return [c["path"] for c in review.body.get("comments", []) if f"`{rule}`" in c["body"]]


async def again(bot: BotHarness, number: int, files: dict[str, str | None], *, by: str = AUTHOR) -> Call:
    bot.fake.push(REPO, "feature", files)
    await bot.drain()
    await bot.fake.comment(REPO, number, "@revbot review", by=by)
    await bot.drain()
    return reviews_posted(bot)[-1]


async def test_the_authors_overrule_of_a_concern_never_withdraws_the_blocker_on_its_line(
    bot: BotHarness,
) -> None:
    """Row 2: the harmless trigger (a concern) is overruled by the author as intentional; then
    the author checks out the pull request's head under it: the pwn request's blocker stands."""
    number = await open_and_review(bot, {WORKFLOW: HARMLESS})
    assert reviews_posted(bot)[-1].body["event"] == "COMMENT"
    root = bot_thread_of(bot.fake, number, "workflow/dangerous-triggers")
    await bot.fake.reply(REPO, number, root, "Intentional: this job only labels.", by=AUTHOR)
    await bot.drain()
    last = await again(bot, number, {WORKFLOW: PWN})
    assert last.body["event"] == "REQUEST_CHANGES"
    assert "`workflow/dangerous-triggers`" in last.body["body"]  # its line was not changed since: listed
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"


async def test_an_overrule_of_a_concern_injection_never_withdraws_a_blocker_injection(
    bot: BotHarness,
) -> None:
    """Row 3: zizmor's template-injection reads the same at both severities."""
    number = await open_and_review(bot, {ACTION: INPUT_ONLY})
    root = bot_thread_of(bot.fake, number, "workflow/template-injection")
    await bot.fake.reply(REPO, number, root, "Intentional: the caller's own input.", by=AUTHOR)
    await bot.drain()
    hostile = INPUT_ONLY.replace(
        "      shell: bash\n",
        '      shell: bash\n    - run: echo "${{ github.event.issue.title }}"\n      shell: bash\n',
    )
    last = await again(bot, number, {ACTION: hostile})
    assert last.body["event"] == "REQUEST_CHANGES"
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"


async def test_a_maintainers_overrule_of_one_injection_leaves_another_in_the_file_standing(
    bot: BotHarness,
) -> None:
    """Row 6: the overrule saw one expression; another in the same file is another finding."""
    number = await open_and_review(bot, {".github/workflows/ci.yml": TITLE})
    assert reviews_posted(bot)[-1].body["event"] == "REQUEST_CHANGES"
    root = bot_thread_of(bot.fake, number, "workflow/template-injection")
    await bot.fake.reply(REPO, number, root, "@revbot dismiss the title is sanitised upstream", by=MAINTAINER)
    await bot.drain()
    assert bot.fake.review_decision(REPO, number) == "APPROVED"
    more = TITLE + '      - run: echo "${{ github.event.pull_request.body }}"\n'
    last = await again(bot, number, {".github/workflows/ci.yml": more}, by=MAINTAINER)
    assert last.body["event"] == "REQUEST_CHANGES"
    assert inline(last, "workflow/template-injection") == [".github/workflows/ci.yml"]


async def test_a_learned_pwn_request_never_withdraws_a_strangers_other_pwn_request(bot: BotHarness) -> None:
    """Row 6: ``dismiss --always`` on one pwn request is a learning of what it saw (its job and
    ref), not of every ``pull_request_target:`` line in the repository's workflows."""
    first = await open_and_review(bot, {WORKFLOW: PWN})
    root = bot_thread_of(bot.fake, first, "workflow/dangerous-triggers")
    await bot.fake.reply(REPO, first, root, "@revbot dismiss --always we build in a sandbox", by=MAINTAINER)
    await bot.drain()
    stranger = PWN.replace("  build:", "  deploy:").replace("head.sha", "head.ref")
    second = bot.open_pull({".github/workflows/other.yml": stranger}, author="mallory", branch="stranger")
    await bot.fake.request_review(REPO, second, "revbot", by="mallory")
    await bot.drain()
    assert reviews_posted(bot)[-1].body["event"] == "REQUEST_CHANGES"
    assert bot.fake.review_decision(REPO, second) == "CHANGES_REQUESTED"


async def test_an_overrule_of_one_secret_never_withdraws_another_in_the_file(bot: BotHarness) -> None:
    """Row 6: two keys in one file read the same message; the overrule saw one of them."""
    one, two = j("AKIA", rand(UPPER_DIGITS, 16)), j("AKIA", rand(UPPER_DIGITS, 16))
    number = await open_and_review(bot, {"deploy/settings.py": f'FIRST = "{one}"\n'})
    root = bot_thread_of(bot.fake, number, "secrets/aws-access-key")
    await bot.fake.reply(REPO, number, root, "@revbot dismiss a revoked key kept for a test", by=MAINTAINER)
    await bot.drain()
    last = await again(
        bot, number, {"deploy/settings.py": f'FIRST = "{one}"\nSECOND = "{two}"\n'}, by=MAINTAINER
    )
    assert last.body["event"] == "REQUEST_CHANGES"
    assert inline(last, "secrets/aws-access-key") == ["deploy/settings.py"]
