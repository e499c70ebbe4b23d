"""``scripts/check_commit_subjects.py``: subjects of at most 72 characters, after a base only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "check_commit_subjects.py"
LONG = "A subject that goes on and on, well past the seventy-two characters git shows"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "--short", "HEAD")


def check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    return tmp_path


def test_only_commits_after_the_base_are_judged(repo: Path) -> None:
    commit(repo, LONG)  # old history: never judged
    base = commit(repo, "The base")
    commit(repo, "x" * 72)
    commit(repo, "Short subject\n\n" + "A body line may be as long as it likes. " * 5)
    assert check(base, "--repo", str(repo)).returncode == 0
    late = commit(repo, LONG)
    done = check(base, "--repo", str(repo))
    assert done.returncode == 1
    complaint = f"{late}: subject is {len(LONG)} characters (at most 72): {LONG[:72]}..."
    assert done.stderr.splitlines() == [complaint]


def test_merge_commits_are_skipped(repo: Path) -> None:
    base = commit(repo, "The base")
    git(repo, "checkout", "-q", "-b", "side")
    commit(repo, "On the side")
    git(repo, "checkout", "-q", "main")
    commit(repo, "On main")
    git(repo, "merge", "-q", "--no-ff", "side", "-m", LONG)
    assert check(base, "--repo", str(repo)).returncode == 0


def test_a_base_missing_from_the_clone_is_named(repo: Path) -> None:
    commit(repo, "Only commit")
    done = check("0123456789abcdef", "--repo", str(repo))
    assert done.returncode == 2 and "0123456789abcdef is not in this clone" in done.stderr


def test_the_commit_msg_hook_reads_the_subject_of_one_message(tmp_path: Path) -> None:
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text("# a comment git strips\nFine subject\n\nbody\n")
    assert check("--message-file", str(message)).returncode == 0
    message.write_text(f"{LONG}\n")
    done = check("--message-file", str(message))
    assert done.returncode == 1 and done.stderr.startswith("this commit: subject is")
