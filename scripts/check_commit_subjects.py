"""Commit subjects are at most 72 characters; the detail goes in the body.

Two ways to run it:

    python scripts/check_commit_subjects.py [BASE]        # every commit in BASE..HEAD (CI)
    python scripts/check_commit_subjects.py --message-file .git/COMMIT_EDITMSG   # one message

The first checks the commits after ``BASE`` (default: ``329dd8c``, the last commit before the
rule, so older history is never judged); merge commits are skipped (git writes their subjects).
The second is the ``commit-msg`` hook of ``.pre-commit-config.yaml``. Exit status 1 lists every
subject that is too long; 2 when ``BASE`` is not in this clone (a shallow clone: fetch more).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

MAX_SUBJECT = 72
RULE_SINCE = "329dd8c"  # main when the rule was adopted


def subject_of(message: str) -> str:
    """The first line that is not a comment git strips (``#``), as git shows it."""
    for line in message.splitlines():
        if not line.startswith("#"):
            return line.rstrip()
    return ""


def too_long(subjects: list[tuple[str, str]]) -> list[str]:
    """``(commit, subject)`` pairs in, one complaint per subject over ``MAX_SUBJECT`` out."""
    return [
        f"{commit}: subject is {len(subject)} characters (at most {MAX_SUBJECT}): {subject[:MAX_SUBJECT]}..."
        for commit, subject in subjects
        if len(subject) > MAX_SUBJECT
    ]


def commits_after(base: str, repo: Path) -> list[tuple[str, str]]:
    """The non-merge commits in ``base..HEAD``, with their subjects."""
    known = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if known.returncode != 0:
        raise LookupError(f"{base} is not in this clone (shallow? fetch the history)")
    out = subprocess.run(
        ["git", "-C", str(repo), "log", "--no-merges", "--format=%h%x00%s", f"{base}..HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [(line.split("\0", 1)[0], line.split("\0", 1)[1]) for line in out.splitlines() if "\0" in line]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "base", nargs="?", default=RULE_SINCE, help=f"check BASE..HEAD (default {RULE_SINCE})"
    )
    parser.add_argument("--message-file", type=Path, help="check one commit message (the commit-msg hook)")
    parser.add_argument("--repo", type=Path, default=Path("."), help="the repository (default: .)")
    args = parser.parse_args(argv)
    if args.message_file is not None:
        subjects = [("this commit", subject_of(args.message_file.read_text(encoding="utf-8")))]
    else:
        try:
            subjects = commits_after(args.base, args.repo)
        except LookupError as exc:
            print(f"check_commit_subjects: {exc}", file=sys.stderr)
            return 2
    problems = too_long(subjects)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
