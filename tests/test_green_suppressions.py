"""Suppressions the pull request adds never hide a blocker (issue 36, row 5): the tools run with
them ignored too; a blocker only the pull request's own directive hid is still its blocker,
said so; a concern or a nit stays suppressed and is listed, collapsed; what the base already
suppressed is honoured."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest

from app.sandbox import Call
from tests.harness import REPO, BotHarness, harness_with_decoy
from tests.test_review_linters import PWN

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AUTHOR = "mallory"
APT_INSTALL = "RUN apt-get update && apt-get install -y curl\n"
DECOY = "revbot"


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[BotHarness]:
    async with harness_with_decoy(tmp_path, DECOY) as harness:
        yield harness


async def review(
    bot: BotHarness, head: Mapping[str, str | None], base: Mapping[str, str | None] | None = None
) -> tuple[int, Call]:
    number = bot.open_pull(head, base_files=base, author=AUTHOR)
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    [posted] = [
        c for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/reviews") and c.status == 200
    ]
    return number, posted


def said(review: Call) -> str:
    return str(review.body["body"]) + "".join(str(c["body"]) for c in review.body.get("comments", []))


@pytest.mark.parametrize(
    ("files", "rule", "directive"),
    [
        (
            {"src/new.py": "# ruff: noqa\ndef handler():\n    return undefined_thing + 1\n"},
            "python/F821",
            "`# ruff: noqa` (line 1)",
        ),
        (
            {"src/new.py": "def handler():\n    return undefined_thing + 1  # noqa: F821\n"},
            "python/F821",
            "`# noqa` (line 2)",
        ),
        (
            {
                ".github/workflows/pwn.yml": PWN.replace(
                    "  pull_request_target:\n",
                    "  pull_request_target: # zizmor: ignore[dangerous-triggers]\n",
                )
            },
            "workflow/dangerous-triggers",
            "`# zizmor: ignore` (line 3)",
        ),
    ],
    ids=["ruff-noqa-file", "noqa-line", "zizmor-ignore"],
)
async def test_a_blocker_the_pull_requests_own_suppression_hides_still_blocks(
    bot: BotHarness, files: dict[str, str | None], rule: str, directive: str
) -> None:
    number, posted = await review(bot, files)
    assert posted.body["event"] == "REQUEST_CHANGES"
    assert f"Suppressed by this pull request ({directive}), yet a blocker" in said(posted)
    assert f"`{rule}`" in said(posted)
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"


async def test_a_nit_the_pull_request_suppresses_stays_suppressed_and_is_listed(bot: BotHarness) -> None:
    _, posted = await review(bot, {"src/new.py": "import os  # noqa\n\nVALUE = 1\n"})
    assert posted.body["event"] == "APPROVE"
    body = posted.body["body"]
    assert "<details><summary>1 finding suppressed by this pull request's own comments</summary>" in body
    assert "`python/F401`" in body
    assert posted.body.get("comments", []) == []  # not inline: suppressed


async def test_a_suppression_the_base_already_had_is_honoured(bot: BotHarness) -> None:
    base = {"src/legacy.py": "# ruff: noqa\nimport os\n"}
    head = {"src/legacy.py": "# ruff: noqa\nimport os\n\n\ndef handler():\n    return undefined_thing\n"}
    _, posted = await review(bot, head, base)
    assert posted.body["event"] == "APPROVE"
    assert "Suppressed by this pull request" not in said(posted)


@pytest.mark.parametrize(
    ("files", "rule"),
    [
        ({"scripts/run.sh": "#!/bin/sh\n# shellcheck disable=SC2086\necho $1\n"}, "shell/SC2086"),
        (
            {"Dockerfile": f"FROM debian:12\n# hadolint ignore=DL3008\n{APT_INSTALL}"},
            "dockerfile/DL3008",
        ),
    ],
    ids=["shellcheck", "hadolint"],
)
async def test_what_a_directive_the_pull_request_added_hides_is_listed(
    bot: BotHarness, files: dict[str, str | None], rule: str
) -> None:
    _, posted = await review(bot, files)
    body = posted.body["body"]
    assert "suppressed by this pull request's own comments</summary>" in body
    listed = body.split("suppressed by this pull request's own comments</summary>", 1)[1]
    assert f"`{rule}`" in listed.split("</details>", 1)[0], body
    assert all(f"`{rule}`" not in c["body"] for c in posted.body.get("comments", []))  # not inline


async def test_a_directive_the_base_already_had_is_honoured_and_not_listed(bot: BotHarness) -> None:
    base = {"scripts/run.sh": "#!/bin/sh\n# shellcheck disable=SC2086\necho $1\n"}
    head = {"scripts/run.sh": "#!/bin/sh\n# shellcheck disable=SC2086\necho $1\necho done\n"}
    _, posted = await review(bot, head, base)
    assert "suppressed by this pull request" not in posted.body["body"]
