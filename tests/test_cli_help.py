"""Every command says what it does, and every option what it means (``--help`` is where a
newcomer looks first)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from app.cli import play, reviewing, service


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = argparse.ArgumentParser(prog="python -m app")
    commands = parser.add_subparsers(dest="command", required=True)
    for group in (service, reviewing, play):
        group.add_commands(commands)
    return dict(commands.choices)


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_option_of_every_command_has_help(name: str) -> None:
    command = subcommands()[name]
    missing = [
        action.dest
        for action in command._actions
        if not isinstance(action, argparse._HelpAction) and not action.help
    ]
    assert missing == [], f"python -m app {name}: options without help: {missing}"


@pytest.mark.parametrize("name", ["review", "replay", "demo", "eval", "setup", "doctor"])
def test_the_commands_a_newcomer_runs_describe_themselves(name: str) -> None:
    assert subcommands()[name].description, f"python -m app {name} --help has no description"


def test_the_commands_page_lists_every_command() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs/commands.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `python -m app (\w+)` \|", page, re.MULTILINE))
    assert listed == set(subcommands())
