"""Patch line mapping, on real ``git diff`` output cut the way GitHub's ``patch`` field is."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from app.review.core.diff import PatchLines, added_text, base_of, blob_id, is_anchorable, parse_patch

GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def git_diff(old: str | None, new: str | None, name: str = "file.txt") -> str:
    """``git diff`` between two versions of one file, headers included."""
    with tempfile.TemporaryDirectory() as tmp:
        before, after = Path(tmp, "a", name), Path(tmp, "b", name)
        for target, text in ((before, old), (after, new)):
            target.parent.mkdir(parents=True, exist_ok=True)
            if text is not None:
                target.write_bytes(text.encode())
        left = str(before) if old is not None else os.devnull
        right = str(after) if new is not None else os.devnull
        done = subprocess.run(
            [
                "git",
                "diff",
                "--no-index",
                "--no-color",
                "--no-ext-diff",
                "--diff-algorithm=myers",
                left,
                right,
            ],
            capture_output=True,
            env=GIT_ENV,
            check=False,
        )
        assert done.returncode in (0, 1), done.stderr
        return done.stdout.decode()


def github_patch(full_diff: str) -> str:
    """What GitHub puts in ``patch``: the hunks, without git's file header or a final newline."""
    lines = full_diff.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("@@")), len(lines))
    return "\n".join(lines[start:]).removesuffix("\n")


def git_patch(old: str | None, new: str | None, name: str = "file.txt") -> str:
    return github_patch(git_diff(old, new, name))


NUMBERED = "".join(f"line {n}\n" for n in range(1, 31))


def _edit(text: str, replace: dict[int, str], insert_after: dict[int, str]) -> str:
    out: list[str] = []
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        out.append(replace.get(number, line))
        if number in insert_after:
            out.append(insert_after[number])
    return "".join(out)


MULTI_HUNK = _edit(NUMBERED, {3: "changed 3\n", 25: "changed 25\n"}, {10: "inserted\n"})


@pytest.mark.parametrize(
    ("old", "new", "right", "added", "no_newline"),
    [
        pytest.param(
            NUMBERED,
            MULTI_HUNK,
            set(range(1, 7)) | set(range(8, 15)) | set(range(23, 30)),  # git keeps a 1-line gap
            {3, 11, 26},
            False,
            id="three-hunks",
        ),
        pytest.param(None, "x\ny\n", {1, 2}, {1, 2}, False, id="added-file"),
        pytest.param("a\n", "b\n", {1}, {1}, False, id="omitted-counts"),
        pytest.param("a\nb\nc\n", "a\nc\n", {1, 2}, set(), False, id="deletion-only"),
        pytest.param("a\nb\n", "a\nb\nc", {1, 2, 3}, {3}, True, id="no-newline-new-side"),
        pytest.param("a\nb", "a\nb\nc\n", {1, 2, 3}, {2, 3}, False, id="no-newline-old-side"),
        pytest.param("a\nb\nc", "A\nb\nc", {1, 2, 3}, {1}, True, id="no-newline-both-sides-context"),
        pytest.param("a\r\nb\r\n", "a\r\nB\r\nc\r\n", {1, 2, 3}, {2, 3}, False, id="crlf-file"),
    ],
)
def test_line_mapping(old: str | None, new: str, right: set[int], added: set[int], no_newline: bool) -> None:
    patch = git_patch(old, new)
    lines = parse_patch(patch)
    assert lines.right_lines == right
    assert lines.added == added
    assert lines.no_newline_at_end is no_newline
    new_lines = new.replace("\r\n", "\n").split("\n")
    assert lines.added_text == {n: new_lines[n - 1] for n in added}


def test_two_hunks_have_their_own_ranges_and_headers_may_carry_a_section() -> None:
    old = "def first():\n" + "".join(f"    x{n} = {n}\n" for n in range(1, 20))
    new = old.replace("    x15 = 15\n", "    x15 = 'fifteen'\n").replace("    x2 = 2\n", "    x2 = 'two'\n")
    patch = git_patch(old, new, "m.py")
    headers = [line for line in patch.split("\n") if line.startswith("@@")]
    assert len(headers) == 2
    assert headers[1].endswith("def first():")  # git's function-name section
    lines = parse_patch(patch)
    assert lines.added == {3, 16}
    assert lines.hunks == ((1, 6), (13, 19))
    assert is_anchorable(lines, 16)
    assert is_anchorable(lines, 16, start_line=13)
    assert not is_anchorable(lines, 16, start_line=3)  # a range may not span hunks
    assert not is_anchorable(lines, 9)  # between the hunks


def test_the_eof_line_is_recorded_only_for_the_new_side() -> None:
    assert parse_patch(git_patch("a\nb\n", "a\nb\nc")).eof_line == 3
    assert parse_patch(git_patch("a\nb", "a\nb\nc\n")).eof_line is None
    unchanged_last = parse_patch(git_patch("a\nb\nc", "A\nb\nc"))
    assert unchanged_last.eof_line == 3 and 3 not in unchanged_last.added


def test_crlf_lines_are_recorded_and_stripped_from_the_text() -> None:
    lines = parse_patch(git_patch("a\r\nb\r\n", "a\r\nB \r\nc\r\n"))
    assert lines.crlf_lines == {1, 2, 3}
    assert lines.added_text == {2: "B ", 3: "c"}


def test_a_patch_transported_with_crlf_reads_like_the_lf_one() -> None:
    patch = git_patch(NUMBERED, MULTI_HUNK)
    assert parse_patch(patch.replace("\n", "\r\n")) == parse_patch(patch)


def test_the_full_git_diff_with_file_headers_parses_the_same() -> None:
    full = git_diff(NUMBERED, MULTI_HUNK)
    assert full.startswith("diff --git")
    assert parse_patch(full) == parse_patch(github_patch(full))


def test_lines_looking_like_headers_inside_a_hunk_are_content() -> None:
    old = "x\n"
    new = "x\n--- not a header\n+++ nor this\n"
    lines = parse_patch(git_patch(old, new))
    assert lines.added_text == {2: "--- not a header", 3: "+++ nor this"}


@pytest.mark.parametrize("patch", [None, "", "\n"])
def test_an_empty_or_missing_patch_has_no_lines(patch: str | None) -> None:
    assert parse_patch(patch) == PatchLines()


def test_a_rename_without_changes_has_no_hunks() -> None:
    with tempfile.TemporaryDirectory() as tmp:

        def git(*args: str) -> str:
            done = subprocess.run(["git", *args], cwd=tmp, capture_output=True, env=GIT_ENV, check=True)
            return done.stdout.decode()

        git("init", "-q")
        Path(tmp, "old.py").write_text("x = 1\n")
        git("add", ".")
        git("commit", "-qm", "one")
        git("mv", "old.py", "new.py")
        full = git("diff", "--cached", "-M", "--no-color")
    assert "rename from old.py" in full
    assert github_patch(full) == ""
    assert parse_patch(github_patch(full)) == PatchLines()


def test_added_lines_at_the_end_of_the_last_hunk_are_the_tail() -> None:
    assert parse_patch(git_patch("a\nb\n", "a\nb\n\n\n")).tail_added == (3, 4)
    assert parse_patch(git_patch("a\nb\nc\nd\n", "a\n\nb\nc\nd\n")).tail_added == ()


def test_a_hand_written_patch_with_missing_blank_context_prefix_is_tolerated() -> None:
    # Some tools strip the single space of an empty context line.
    patch = "@@ -1,3 +1,4 @@\n a\n\n+new\n b"
    lines = parse_patch(patch)
    assert lines.right_lines == {1, 2, 3, 4}
    assert lines.added == {3}


ROUND_TRIPS = {
    "three-hunks": (NUMBERED, MULTI_HUNK),
    "omitted-counts": ("a\n", "b\n"),
    "deletion-only": ("a\nb\nc\n", "a\nc\n"),
    "deleted-at-the-start": ("a\nb\nc\nd\n", "c\nd\n"),
    "deleted-at-the-end": (NUMBERED, "".join(NUMBERED.splitlines(keepends=True)[:20])),
    "added-at-the-end": ("a\nb\n", "a\nb\nc\nd\n"),
    "no-newline-new-side": ("a\nb\n", "a\nb\nc"),
    "no-newline-old-side": ("a\nb", "a\nb\nc\n"),
    "no-newline-both-sides-context": ("a\nb\nc", "A\nb\nc"),
    "no-newline-both-sides-changed": ("a\nb", "a\nB"),
    "crlf-file": ("a\r\nb\r\n", "a\r\nB\r\nc\r\n"),
    "everything-replaced": ("one\ntwo\n", "three\nfour\nfive\n"),
}


@pytest.mark.parametrize(("base", "head"), list(ROUND_TRIPS.values()), ids=list(ROUND_TRIPS))
def test_the_base_is_rebuilt_from_the_head_and_its_patch(base: str, head: str) -> None:
    assert base_of(head, git_patch(base, head)) == base


def test_a_patch_that_does_not_fit_the_head_rebuilds_nothing() -> None:
    patch = git_patch("a\nb\nc\n", "a\nB\nc\n")
    assert base_of("a\nX\nc\n", patch) is None  # the added line is not what the head holds
    assert base_of("a\n", patch) is None  # shorter than the hunk
    assert base_of("a\nB\nc\n", None) is None
    assert base_of("a\nB\nc\n", "") is None
    assert base_of("a\nB\nc\n", "not a patch") is None


LINES = [f"value_{n} = {n} * 2\n" for n in range(10)]


@pytest.mark.parametrize(
    ("new", "renamed"),
    [
        ("".join(LINES), True),  # the same content
        ("".join(LINES[:9]) + "value_9 = 'changed'\n", True),  # nine lines in ten kept
        ("".join(LINES[:2]) + "".join(f"other_{n} = {n}\n" for n in range(8)), False),  # two in ten
    ],
)
def test_the_fake_pairs_renames_as_git_does(new: str, renamed: bool) -> None:
    """The fake GitHub's file list reports a removed file that reappears, at least half the same,
    as renamed (with its patch), where git's rename detection does."""
    from app.sandbox.diff import diff_trees

    with tempfile.TemporaryDirectory() as tmp:

        def git(*args: str) -> str:
            done = subprocess.run(["git", *args], cwd=tmp, capture_output=True, env=GIT_ENV, check=True)
            return done.stdout.decode()

        git("init", "-q")
        Path(tmp, "old.py").write_text("".join(LINES))
        git("add", ".")
        git("commit", "-qm", "one")
        Path(tmp, "old.py").unlink()
        Path(tmp, "new.py").write_text(new)
        git("add", "-A")
        status = git("diff", "--cached", "-M", "--name-status")
    assert status.startswith("R") is renamed
    entries = diff_trees({"old.py": "".join(LINES)}, {"new.py": new})
    if renamed:
        [entry] = entries
        assert (entry.status, entry.previous_filename) == ("renamed", "old.py")
        assert (entry.patch is None) is (new == "".join(LINES))
    else:
        assert sorted(e.status for e in entries) == ["added", "removed"]


@pytest.mark.parametrize(
    ("text", "patch", "rebuilt"),
    [
        ("a\nb\n", "@@ -0,0 +1,2 @@\n+a\n+b", True),
        ("a\nb", "@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file", True),
        ("a\r\nb\r\n", "@@ -0,0 +1,2 @@\n+a\r\n+b\r", True),  # CRLF kept, as git keeps it
        ("héllo\n", "@@ -0,0 +1 @@\n+héllo", True),  # the id is of the UTF-8 bytes
        ("a\nb\n", "@@ -1,1 +1,2 @@\n a\n+b", False),  # a modified file: its patch is not all of it
        ("a\nb\n", "@@ -0,0 +1,2 @@\n+a", False),  # a patch GitHub cut: the id does not match
        ("a\nc\n", "@@ -0,0 +1,2 @@\n+a\n-b", False),  # not an added file's shape
        ("a\0b\n", "@@ -0,0 +1 @@\n+a\0b", False),  # a NUL: read it, as the reader decides binary
        ("", None, False),
    ],
)
def test_an_added_file_is_its_patch_only_when_its_blob_id_says_so(
    text: str, patch: str | None, rebuilt: bool
) -> None:
    assert added_text(patch, blob_id(text)) == (text if rebuilt else None)
    assert added_text(patch, None) is None  # no id listed: never trusted


def test_the_blob_id_is_gits() -> None:
    text = "héllo\r\nwörld"
    done = subprocess.run(
        ["git", "hash-object", "--stdin"], input=text.encode(), capture_output=True, check=True
    )
    assert blob_id(text) == done.stdout.decode().strip()
