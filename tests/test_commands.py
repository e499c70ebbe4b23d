"""The commands people write to the bot: which mention is a command (``parse_command``) and the prose
it is looked for in (code, quotes and mail addresses are not)."""

from __future__ import annotations

import pytest

from app.commands import Command, only_a_command, parse_command, prose
from app.usecases.bot import CommandBudget


@pytest.mark.parametrize(
    ("body", "command"),
    [
        ("@revbot review", Command.REVIEW),
        ("@RevBot REVIEW please", Command.REVIEW),
        ("@revbot", Command.REVIEW),
        ("hey @revbot can you take a look?", Command.REVIEW),
        ("@revbot help", Command.HELP),
        ("@revbot: help!", Command.HELP),
        ("thanks @revbot!", None),
        ("nothing for the bot", None),
        ("`@revbot review`", None),
        ("```\n@revbot review\n```", None),
        ("~~~python\n@revbot review\n~~~\nlater text", None),
        ("> @revbot review\nI agree with the above", None),
        ("mail me at me@revbot.dev about the review", None),
        ("@revbot-ci review", None),
        ("@revbot[bot] review", None),
        ("```\ncode\n```\n@revbot review", Command.REVIEW),
    ],
)
def test_mentions(body: str, command: Command | None) -> None:
    assert parse_command(body, "revbot") == command


def test_prose_keeps_text_between_code_blocks() -> None:
    assert prose("a\n```\nb\n```\nc `d` e\n> f").split() == ["a", "c", "e"]


@pytest.mark.parametrize(
    ("body", "bare"),
    [
        ("@revbot review", True),
        ("@revbot", True),
        ("@revbot resolve.", True),
        ("@revbot review please, I moved the check into helper()", False),
        ("Fixed in the last commit", False),
        ("thanks @revbot!", False),
        ("", False),
    ],
)
def test_a_reply_that_only_gives_a_command_says_nothing_about_the_code(body: str, bare: bool) -> None:
    assert only_a_command(body, "revbot") is bare


def test_the_command_budget_counts_each_key_over_a_sliding_hour() -> None:
    now = [0.0]
    budget = CommandBudget(clock=lambda: now[0])
    assert [budget.take(("o/r", 1, "mallory"), 3) for _ in range(4)] == [True, True, True, False]
    assert budget.take(("o/r", 1, "maria"), 3)  # another person's budget
    assert budget.take(("o/r", 2, "mallory"), 3)  # another pull request's
    now[0] += 3600.5  # an hour after the first: room again
    assert budget.take(("o/r", 1, "mallory"), 3)
