"""The adversarial table: every lever a pull request's author holds, crossed with the three greens
maintainers act on (issue 36). Each row is a hostile pull request that carries a real blocker and
pulls one lever; after the bot has settled (its review, its re-reviews, readiness's quiet window)
none of the greens may stand:

1. the bot's APPROVE at the current head (its latest decision on GitHub);
2. a passing ``revbot review`` check run at the head (GitHub passes ``success``, ``neutral`` and
   ``skipped``; a missing run is pending, not passing);
3. readiness's ``revbot readiness`` check ``success`` and its "Looks merge-ready" call.

A new analyzer, command or setting comes with its rows here (CONTRIBUTING.md). The controls first
check that each kind of blocker blocks without a lever, so a row fails only when a lever works.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import FakeClock
from tests.harness import BOT, REPO, BotHarness, bot_thread_of
from tests.test_readiness_e2e import QUIET, SETTLED, Bot, green
from tests.test_review_linters import PWN
from tests.test_trusted_verdict import STACK_OVERFLOW

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AUTHOR = "mallory"  # a stranger with a fork, as far as the bot can tell
MAINTAINER = "maria"
DECOY = "revbot"
UNDEFINED = "def handler():\n    return undefined_thing + 1\n"
CLEAN = "def handler():\n    return 1\n"
WORKFLOW = ".github/workflows/ci.yml"
PASSING = ("success", "neutral", "skipped")
KEY = "-----BEGIN RSA PRIVATE KEY-----"

Files = Mapping[str, str | None]
After = Callable[[Bot, int], Awaitable[None]]


@dataclass(frozen=True)
class Lever:
    """One row: the pull request's files (carrying a blocker, or clean when ``after`` brings it),
    the base's files, and what the author (or a maintainer, narrowly) does after the first review."""

    name: str
    head: Files
    base: Files | None = None
    after: After | None = None


# --- what the rows do after the first review --------------------------------------------------
def push(files: Files) -> After:
    async def act(bot: Bot, number: int) -> None:
        bot.fake.push(REPO, "feature", files)
        await bot.h.drain()

    return act


def reply(rule: str, text: str, *, by: str = AUTHOR) -> After:
    async def act(bot: Bot, number: int) -> None:
        await bot.fake.reply(REPO, number, bot_thread_of(bot.fake, number, rule), text, by=by)
        await bot.h.drain()

    return act


def comment(text: str, times: int = 1) -> After:
    async def act(bot: Bot, number: int) -> None:
        for _ in range(times):
            await bot.fake.comment(REPO, number, text, by=AUTHOR)
        await bot.h.drain()

    return act


def thumbs_down(rule: str) -> After:
    async def act(bot: Bot, number: int) -> None:
        root = bot_thread_of(bot.fake, number, rule)
        bot.fake.actions.react(bot.fake.world.repo(REPO), ("review_comment", root), AUTHOR, "-1")
        await bot.fake.comment(REPO, number, "@revbot resolve", by=AUTHOR)
        await bot.h.drain()

    return act


def resolve_by_hand(rule: str) -> After:
    async def act(bot: Bot, number: int) -> None:
        world = bot.fake.world
        root = bot_thread_of(bot.fake, number, rule)
        [thread] = [
            t for t in world.threads_of(world.pull(world.repo(REPO), number)) if t.comment_ids[0] == root
        ]
        await bot.fake.resolve_thread(thread.node_id, by=AUTHOR)
        await bot.fake.comment(REPO, number, "@revbot review", by=AUTHOR)
        await bot.h.drain()

    return act


def then(*steps: After) -> After:
    async def act(bot: Bot, number: int) -> None:
        for step in steps:
            await step(bot, number)

    return act


SETTINGS = ".github/revbot.yml"
HARMLESS_TRIGGER = PWN.replace("          ref: ${{ github.event.pull_request.head.sha }}\n", "")

LEVERS = [
    # --- its files: the rules it would be judged by ---------------------------------------
    Lever(
        "ruff config turns the rules off",
        {"pyproject.toml": "[tool.ruff]\nselect = []\n", "src/app.py": UNDEFINED},
    ),
    Lever(
        "ruff.toml excludes the file", {"ruff.toml": 'extend-exclude = ["src"]\n', "src/app.py": UNDEFINED}
    ),
    Lever(
        "flake8 config excludes the file", {".flake8": "[flake8]\nexclude = src\n", "src/app.py": UNDEFINED}
    ),
    Lever(
        "setup.cfg per-file-ignores",
        {"setup.cfg": "[flake8]\nper-file-ignores = src/*:F821\n", "src/app.py": UNDEFINED},
    ),
    Lever(
        "pre-commit excludes the file",
        {".pre-commit-config.yaml": "exclude: '^src/'\nrepos: []\n", "src/app.py": UNDEFINED},
    ),
    Lever(
        "bot settings: approve, ignore everything",
        {SETTINGS: "review:\n  approve: true\n  paths_ignore: ['**']\n", "src/app.py": UNDEFINED},
    ),
    Lever(
        "bot settings: readiness ignores the check",
        {SETTINGS: "readiness:\n  ignore_checks: ['revbot review']\n", "src/app.py": UNDEFINED},
    ),
    Lever(
        ".gitattributes marks it generated",
        {".gitattributes": "src/* linguist-generated=true\n", "src/app.py": UNDEFINED},
    ),
    Lever("a generated header", {"src/app.py": "# @generated\n" + UNDEFINED}),
    Lever("a do-not-edit header", {"src/app.py": "# Code generated by hand. DO NOT EDIT.\n" + UNDEFINED}),
    Lever("a vendored path", {"vendor/lib/app.py": UNDEFINED}),
    Lever("a third_party path", {"third_party/app.py": UNDEFINED}),
    # --- suppression comments it adds -------------------------------------------------------
    Lever("# ruff: noqa on top", {"src/app.py": "# ruff: noqa\n" + UNDEFINED}),
    Lever("# noqa on the line", {"src/app.py": UNDEFINED.replace("+ 1\n", "+ 1  # noqa\n")}),
    Lever("# noqa: F821 on the line", {"src/app.py": UNDEFINED.replace("+ 1\n", "+ 1  # noqa: F821\n")}),
    Lever(
        "# zizmor: ignore on a pwn request",
        {
            WORKFLOW: PWN.replace(
                "  pull_request_target:\n", "  pull_request_target: # zizmor: ignore[dangerous-triggers]\n"
            )
        },
    ),
    # --- crafted files that crash or exhaust a tool -----------------------------------------
    Lever(
        "3,000 nested [ beside a pwn request",
        {".github/workflows/nested.yml": "on: push\njobs: " + "[" * 3000 + "]" * 3000 + "\n", WORKFLOW: PWN},
    ),
    Lever("a 40 KB 1+1+... that crashes ruff", {"src/big.py": STACK_OVERFLOW, "src/app.py": UNDEFINED}),
    Lever("a file at .ruff.toml/x.py", {".ruff.toml/x.py": "x = 1\n", "src/app.py": UNDEFINED}),
    Lever("a binary file beside it", {"assets/blob.bin": "\x00\x01\x02" * 100, "src/app.py": UNDEFINED}),
    Lever("a huge file beside it", {"src/huge.py": "x = 1\n" * 200_000, "src/app.py": UNDEFINED}),
    # --- names --------------------------------------------------------------------------------
    Lever("a path with spaces and unicode", {"src/ünï cødé.py": UNDEFINED}),
    Lever(
        "the blocker in a renamed file",
        {"src/renamed.py": UNDEFINED, "src/app.py": None},
        base={"src/app.py": CLEAN},
    ),
    # --- pushes after a verdict ------------------------------------------------------------------
    Lever("push after approval", {"src/app.py": CLEAN}, after=push({"src/app.py": UNDEFINED})),
    Lever(
        "push after approval, on_push",
        {"src/app.py": CLEAN},
        base={SETTINGS: "review:\n  on_push: true\n"},
        after=push({"src/app.py": UNDEFINED}),
    ),
    Lever(
        "push after approval, dismiss",
        {"src/app.py": CLEAN},
        base={SETTINGS: "review:\n  approval_on_push: dismiss\n"},
        after=push({"src/app.py": UNDEFINED}),
    ),
    Lever("pwn request pushed after approval", {"src/app.py": CLEAN}, after=push({WORKFLOW: PWN})),
    # --- what the base already had: only what the pull request introduced is blamed ------------
    Lever(
        "the base's undefined name, used again in another function",
        {"src/app.py": UNDEFINED + "\n\ndef other():\n    return undefined_thing\n"},
        base={"src/app.py": UNDEFINED},
    ),
    Lever(
        "the base's undefined name, once more in its own function",
        {"src/app.py": "def handler():\n    first = undefined_thing\n    return undefined_thing + first\n"},
        base={"src/app.py": UNDEFINED},
    ),
    Lever(
        "a new undefined name beside the base's, in a renamed file",
        {"src/app.py": None, "src/service.py": UNDEFINED.replace("+ 1", "+ also_undefined")},
        base={"src/app.py": UNDEFINED},
    ),
    Lever(  # not blamed for it, but not approved unread either
        "a file the base could not parse either, touched",
        {"src/broken.py": "def f(:\n    pass\n\n# touched\n"},
        base={"src/broken.py": "def f(:\n    pass\n"},
    ),
    # --- the Python it declares ------------------------------------------------------------------
    Lever(
        "raises requires-python, and hides nothing by it",
        {"pyproject.toml": '[project]\nname = "w"\nrequires-python = ">=3.14"\n', "src/app.py": UNDEFINED},
        base={"pyproject.toml": '[project]\nname = "w"\nrequires-python = ">=3.9"\n'},
    ),
    # --- how it is said ----------------------------------------------------------------------------
    Lever("a blocker on the line of a nit", {"src/app.py": "import os\nprint(undefined_thing)\n"}),
    # --- the author's replies, reactions and commands ------------------------------------------
    Lever(
        "author replies 'Intentional'",
        {"src/app.py": UNDEFINED},
        after=reply("python/F821", "Intentional, false positive."),
    ),
    Lever(
        "author says @revbot dismiss",
        {"src/app.py": UNDEFINED},
        after=reply("python/F821", "@revbot dismiss --always it is fine"),
    ),
    Lever("author 👎 and resolve", {"src/app.py": UNDEFINED}, after=thumbs_down("python/F821")),
    Lever(
        "author resolves the thread by hand", {"src/app.py": UNDEFINED}, after=resolve_by_hand("python/F821")
    ),
    Lever("@revbot review spam", {"src/app.py": UNDEFINED}, after=comment("@revbot review", times=8)),
    Lever("@revbot help spam", {"src/app.py": UNDEFINED}, after=comment("@revbot help", times=8)),
    # --- a narrow decision, then a blocker it did not see ----------------------------------------
    Lever(
        "concern overruled, then a pwn request on its line",
        {WORKFLOW: HARMLESS_TRIGGER},
        after=then(
            reply("workflow/dangerous-triggers", "Intentional: it only labels."), push({WORKFLOW: PWN})
        ),
    ),
]


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    clock = FakeClock(time.time())
    harness = BotHarness(tmp_path, clock=clock, env={"READINESS_SETTLE_SECONDS": "5"})
    harness.fake.add_user(DECOY)
    harness.fake.add_user(MAINTAINER)
    harness.fake.set_association(REPO, MAINTAINER, "MEMBER")
    yield Bot(harness, clock)
    await harness.stop()


async def settle(bot: Bot, lever: Lever) -> int:
    """The hostile pull request, reviewed, the lever pulled, CI green, the quiet window over."""
    bot.fake.push(REPO, "main", {"README.md": "# widgets\n", **(lever.base or {})})
    number = bot.h.open_pull(dict(lever.head), author=AUTHOR)
    await bot.h.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.h.drain()
    if lever.after is not None:
        await lever.after(bot, number)
    await green(bot, number, "test")
    await bot.tick(SETTLED + QUIET)
    return number


def greens(bot: Bot, number: int) -> list[str]:
    """Which of the three greens stand at the pull request's head."""
    world = bot.fake.world
    head = bot.head(number)
    reached = []
    deciding = [
        r
        for r in world.reviews_of(world.pull(world.repo(REPO), number))
        if r.user == BOT and r.state in ("APPROVED", "CHANGES_REQUESTED")
    ]
    if deciding and deciding[-1].state == "APPROVED":
        reached.append(f"APPROVE of {deciding[-1].commit_id[:7]} stands on {head[:7]}")
    runs = [r for r in world.check_runs.values() if r.name == "revbot review" and r.head_sha == head]
    if runs and runs[-1].conclusion in PASSING:
        reached.append(f"review check {runs[-1].conclusion}: {runs[-1].title}")
    conclusion, title = bot.check(number)
    if conclusion == "success" or "Looks merge-ready" in (title or ""):
        reached.append(f"readiness {conclusion}: {title}")
    return reached


@pytest.mark.parametrize(
    "blocker",
    [
        {"src/app.py": UNDEFINED},
        {WORKFLOW: PWN},
        {"deploy/key.pem": f"{KEY}\nMIIEowIBAAKCAQEAx0a\n-----END RSA PRIVATE KEY-----\n"},
    ],
    ids=["undefined name", "pwn request", "private key"],
)
async def test_control_each_blocker_blocks_without_a_lever(bot: Bot, blocker: Files) -> None:
    number = await settle(bot, Lever("none", blocker))
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"
    assert greens(bot, number) == []


@pytest.mark.parametrize("lever", LEVERS, ids=[lever.name for lever in LEVERS])
async def test_no_lever_reaches_a_green(bot: Bot, lever: Lever) -> None:
    number = await settle(bot, lever)
    assert greens(bot, number) == [], lever.name
