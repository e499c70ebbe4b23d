"""``eval --history``: regression pairs mined from a synthetic repository built here (a regression
and its fix, a revert, a block moved to another file, a whitespace-only reformat and a
whitespace-only "fix", a fix in a file the introducing commit did not touch), and the built-in
reviewer scored on them by location; then the pure parts, table-driven."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.offline import offline
from app.review.core.model import Finding, ReviewResult, Severity, Skipped, Verdict
from app.review.engine.builtin import BuiltinReviewer
from app.review.measure.blame import map_back, parse_blame, removed_lines
from app.review.measure.history_eval import Detection, evaluate_history, hits_of, score, shown_lines
from app.review.measure.history_mine import (
    Drop,
    Signal,
    Target,
    classify,
    mine,
    own_pull_number,
    pairs_from_file,
)
from app.settings.config import load_reviewer_settings

ROOT = Path(__file__).resolve().parent.parent


class Repo:
    """A git repository whose commits get increasing, fixed dates (blame's "most recent" is
    then well defined)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.clock = 1_700_000_000
        path.mkdir()
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.email", "dev@example.com")
        self.git("config", "user.name", "Dev")

    def git(self, *args: str) -> str:
        env = os.environ | {
            "GIT_COMMITTER_DATE": f"{self.clock} +0000",
            "GIT_AUTHOR_DATE": f"{self.clock} +0000",
        }
        done = subprocess.run(
            ["git", "-C", str(self.path), *args], check=True, capture_output=True, text=True, env=env
        )
        return done.stdout

    def commit(self, message: str, files: dict[str, str | None]) -> str:
        for name, text in files.items():
            target = self.path / name
            if text is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        self.clock += 3600
        self.git("add", "-A")
        self.git("commit", "-qm", message)
        return self.git("rev-parse", "HEAD").strip()


CORE = "def total(items):\n    return sum(items)\n"
HELPER = "def helper(value):\n    normalised = value.strip().lower()\n    return normalised\n"
MEAN_OK = "def mean(items):\n    return sum(items) / len(items)\n"
OTHER = "def scale(value):\n    return value * 2\n\n\ndef shift(value):\n    return value + 1\n"
PADDING = "".join(f"A{n} = {n}\n" for n in range(12))


def build(tmp_path: Path) -> tuple[Repo, dict[str, str]]:
    repo = Repo(tmp_path / "repo")
    c: dict[str, str] = {}
    c["base"] = repo.commit(
        "Initial layout",
        {"pkg/__init__.py": "", "pkg/core.py": CORE, "pkg/other.py": OTHER, "README.md": "# pkg\n"},
    )
    # 1. A stray print, later removed as a regression: the reviewer's concern is on that line.
    c["print"] = repo.commit(
        "Report totals",
        {"pkg/core.py": "def total(items):\n    result = sum(items)\n    print(result)\n    return result\n"},
    )
    c["print-fix"] = repo.commit(
        "Fix regression: totals printed to stdout",
        {"pkg/core.py": "def total(items):\n    result = sum(items)\n    return result\n"},
    )
    # 2. A logic error with a print far away: a concern, but not on the broken line (missed).
    c["mean"] = repo.commit(
        "Add mean",
        {
            "pkg/stats.py": "def mean(items):\n    return sum(items) / (len(items) - 1)\n\n\n"
            + PADDING
            + "def debug_dump(items):\n    print(items)\n"
        },
    )
    c["mean-fix"] = repo.commit(
        "mean() broke on every input",
        {"pkg/stats.py": MEAN_OK + "\n\n" + PADDING + "def debug_dump(items):\n    print(items)\n"},
    )
    # 3. A commit and its revert.
    c["limit"] = repo.commit(
        "Add a limit", {"pkg/limit.py": "LIMIT = 10\n\n\ndef cap(n):\n    return min(n, LIMIT)\n"}
    )
    c["revert"] = repo.commit(
        f'Revert "Add a limit"\n\nThis reverts commit {c["limit"]}.', {"pkg/limit.py": None}
    )
    # 4. A block written in one file, moved verbatim to another, then fixed there.
    # (git blame -C follows a moved block of at least 40 alphanumeric characters)
    block = HELPER.replace("value):\n", "value):\n    print(value)\n")
    c["moved-intro"] = repo.commit("Add a helper", {"pkg/a.py": "X = 1\n\n\n" + block})
    c["move"] = repo.commit("Move the helper", {"pkg/a.py": "X = 1\n", "pkg/b.py": "Y = 2\n\n\n" + block})
    c["moved-fix"] = repo.commit("Fix broken helper output", {"pkg/b.py": "Y = 2\n\n\n" + HELPER})
    # 5. Lines reformatted (whitespace only) between the introducing commit and the fix.
    c["ws-intro"] = repo.commit("Add offset", {"pkg/offset.py": "def offset(n):\n    return n+2\n"})
    c["ws-reformat"] = repo.commit("Reformat", {"pkg/offset.py": "def offset(n):\n    return n + 2\n"})
    c["ws-fix"] = repo.commit(
        "Fix regression in offset", {"pkg/offset.py": "def offset(n):\n    return n + 1\n"}
    )
    # 6. A "fix" that only re-spaces: nothing to blame.
    c["ws-only"] = repo.commit(
        "Fix broken formatting", {"pkg/offset.py": "def offset(n):\n    return  n + 1\n"}
    )
    # 7. A fix in a file the named introducing pull request did not touch: not visible to it.
    c["widget"] = repo.commit("Add widget (#12)", {"pkg/widget.py": "def widget():\n    return 1\n"})
    c["other-fix"] = repo.commit(
        "Fix crash introduced in #12 (#13)",
        {"pkg/other.py": OTHER.replace("value * 2", "value * 3")},
    )
    # Not candidates, or dropped: docs, tests only, an ordinary change.
    c["docs"] = repo.commit("Fix broken link", {"README.md": "# pkg!\n"})
    c["tests"] = repo.commit(
        "Fix broken test", {"tests/test_core.py": "def test_total():\n    assert True\n"}
    )
    c["tests2"] = repo.commit(
        "Fix broken test again", {"tests/test_core.py": "def test_total():\n    assert 1\n"}
    )
    c["ordinary"] = repo.commit("Add a constant", {"pkg/const.py": "SIZE = 3\n"})
    return repo, c


@pytest.mark.slow
async def test_mines_the_pairs_and_scores_the_builtin_reviewer_exactly(tmp_path: Path) -> None:
    repo, c = build(tmp_path)
    mined = await mine(repo.path)

    pairs = {(p.intro, p.fix): p for p in mined.pairs}
    assert set(pairs) == {
        (c["print"], c["print-fix"]),
        (c["mean"], c["mean-fix"]),
        (c["limit"], c["revert"]),
        (c["moved-intro"], c["moved-fix"]),  # blame followed the move back to where it was written
        (c["ws-intro"], c["ws-fix"]),  # and looked through the reformat
        (c["widget"], c["other-fix"]),  # the pull request the message names
    }
    assert pairs[c["limit"], c["revert"]].signal is Signal.REVERT
    assert pairs[c["widget"], c["other-fix"]].signal is Signal.INTRODUCED
    assert pairs[c["print"], c["print-fix"]].targets == (Target("pkg/core.py", 3),)
    assert pairs[c["mean"], c["mean-fix"]].targets == (Target("pkg/stats.py", 2),)
    assert pairs[c["limit"], c["revert"]].targets == tuple(Target("pkg/limit.py", n) for n in range(1, 6))
    # In the introducing commit's coordinates: a.py, where the block was written, not b.py.
    assert pairs[c["moved-intro"], c["moved-fix"]].targets == (Target("pkg/a.py", 5),)
    assert pairs[c["ws-intro"], c["ws-fix"]].targets == (Target("pkg/offset.py", 2),)
    # other.py's line 2, where it was at #12 (which did not touch other.py)
    assert pairs[c["widget"], c["other-fix"]].targets == (Target("pkg/other.py", 2),)
    assert mined.candidates == 10
    assert mined.dropped == {Drop.WHITESPACE: 1, Drop.NO_PYTHON: 1, Drop.TESTS_ONLY: 2}

    builtin = BuiltinReviewer()
    async with offline(load_reviewer_settings({}), reviewer=builtin) as bot:  # the bot's pipeline
        report = await evaluate_history(
            repo.path, mined, builtin, review=bot.review_range, label="builtin", commits=3
        )
    outcomes = {(r.pair.intro, r.pair.fix): r for r in report.results}
    assert {k: r.outcome for k, r in outcomes.items()} == {
        (c["print"], c["print-fix"]): Detection.HIT,
        (c["mean"], c["mean-fix"]): Detection.MISSED,  # its print is 17 lines away
        (c["limit"], c["revert"]): Detection.MISSED,
        (c["moved-intro"], c["moved-fix"]): Detection.HIT,
        (c["ws-intro"], c["ws-fix"]): Detection.MISSED,
        (c["widget"], c["other-fix"]): Detection.NOT_VISIBLE,
    }
    hit = outcomes[c["print"], c["print-fix"]]
    assert [(f.path, f.line, f.rule) for f in hit.hits] == [("pkg/core.py", 3, "debug/print")]
    assert outcomes[c["mean"], c["mean-fix"]].findings == 1  # the far print: a finding, not a hit
    totals = report.totals()
    assert (totals["pairs"], totals["hit"], totals["missed"], totals["not_visible"]) == (6, 2, 3, 1)
    assert totals["recall_of_visible"] == 0.4
    assert totals["hits_by_rule"] == {"debug/print": 2}
    assert totals["hits_by_severity"] == {"concern": 2}
    # Precision on ordinary commits: the pairs' own commits are not among them.
    reviewed = [r.sha for r in report.precision.reviews]
    assert reviewed == [c["ordinary"], c["tests2"], c["tests"]]
    assert totals["ordinary_commits"]["per_100_commits"] == {"blocker": 0.0, "concern": 0.0}


@pytest.mark.slow
async def test_listed_pairs_and_the_limit(tmp_path: Path) -> None:
    repo, c = build(tmp_path)
    listing = f"# intro\tfix\n{c['mean'][:10]}\t{c['mean-fix']}\tnote\n\n{c['base']}\tdeadbeef\n"
    mined = await pairs_from_file(repo.path, listing)
    assert [(p.intro, p.fix, p.signal) for p in mined.pairs] == [(c["mean"], c["mean-fix"], Signal.LISTED)]
    assert mined.dropped == {Drop.UNKNOWN_COMMIT: 1}

    limited = await mine(repo.path, limit=2)
    assert len(limited.pairs) == 2
    assert limited.dropped[Drop.LIMIT] >= 1


@pytest.mark.slow
def test_the_command_prints_pairs_then_totals_and_json(tmp_path: Path) -> None:
    repo, c = build(tmp_path)
    command = [sys.executable, "-m", "app", "eval", "--history", str(repo.path), "--commits", "2"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert f"{c['print'][:10]} <- {c['print-fix'][:10]}  hit" in done.stdout
    assert "recall: 2/6 pairs hit (33%); 2/5 of the visible (40%); 3 missed, 1 not visible" in done.stdout
    assert "ordinary commits: 2 reviewed; per 100 commits: 0.0 blockers, 0.0 concerns" in done.stdout

    done = subprocess.run(
        [*command, "--format", "json"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    data = json.loads(done.stdout)
    assert data["totals"]["dropped"] == {"no_python": 1, "tests_only": 2, "whitespace": 1}
    assert sorted(p["outcome"] for p in data["pairs"]) == [
        "hit",
        "hit",
        "missed",
        "missed",
        "missed",
        "not visible",
    ]

    for args, message in (
        (["--history", str(tmp_path)], "is not a git repository"),
        (["--history", str(repo.path), "--limit", "0"], "--limit expects a positive number"),
        (["--history", str(repo.path), "--pairs", str(tmp_path / "none.tsv")], "is not a file"),
    ):
        bad = subprocess.run(
            [sys.executable, "-m", "app", "eval", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert bad.returncode == 2
        assert message in bad.stderr


# --- the pure parts -----------------------------------------------------------------------------

PULLS = {12: "a" * 40, 40: "b" * 40}
SHAS = {"c" * 40}


def resolve(prefix: str) -> str | None:
    return next((s for s in SHAS if s.startswith(prefix)), None)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (f'Revert "x"\n\nThis reverts commit {"c" * 12}.', (Signal.REVERT, "c" * 40)),
        ('Revert "x"\n\nThis reverts commit 0123456789.', (Signal.REVERT, None)),  # unknown sha
        ("Fix crash introduced in #12", (Signal.INTRODUCED, "a" * 40)),
        ("Fix crash introduced by #99", (Signal.INTRODUCED, None)),  # no known pull request
        (f"Bug caused by {'c' * 7}", (Signal.INTRODUCED, "c" * 40)),
        ("Fix regression from #40 (#41)", (Signal.REGRESSION, "b" * 40)),
        ("Fix regression (#12)", (Signal.REGRESSION, None)),  # #12 is the fix's own pull request
        ("Handle the broken pipe", (Signal.BROKE, None)),
        ("Follow-up to #12", (Signal.FOLLOW_UP, "a" * 40)),
        ("followup: tidy", (Signal.FOLLOW_UP, None)),
        ("Fix the parser for #40", (Signal.PULL_REFERENCE, "b" * 40)),
        ("Fix the parser for #77", None),  # an issue, not a known pull request
        ("Add the parser (#40)", None),
        ("Document #40", None),  # a reference without a word of fixing
        ("Breaking news: add a feature", None),
        ("Progress on regressive tax", None),
    ],
)
def test_classify(message: str, expected: tuple[Signal, str | None] | None) -> None:
    assert classify(message, pulls=PULLS, resolve=resolve) == expected


@pytest.mark.parametrize(
    ("subject", "number"),
    [("Merge pull request #5 from a/b", 5), ("Add x (#17)", 17), ("Add x #17", None), ("Add (#3) x", None)],
)
def test_own_pull_number(subject: str, number: int | None) -> None:
    assert own_pull_number(subject) == number


@pytest.mark.parametrize(
    ("hunks", "new_line", "old_line"),
    [
        ([], 7, 7),
        (["@@ -5,0 +6,2 @@", "+a", "+b"], 5, 5),  # before an insertion
        (["@@ -5,0 +6,2 @@", "+a", "+b"], 6, None),  # inserted
        (["@@ -5,0 +6,2 @@", "+a", "+b"], 8, 6),  # after it
        (["@@ -6,2 +5,0 @@", "-a", "-b"], 5, 5),  # before a deletion
        (["@@ -6,2 +5,0 @@", "-a", "-b"], 6, 8),  # after it
        (["@@ -3 +3,2 @@", "-a", "+b", "+c"], 4, None),
        (["@@ -3 +3,2 @@", "-a", "+b", "+c"], 5, 4),
        (["@@ -3 +3,2 @@", "-a", "+b", "+c", "@@ -10,2 +11 @@", "-d", "-e", "+f"], 9, 8),
        (["@@ -3 +3,2 @@", "-a", "+b", "+c", "@@ -10,2 +11 @@", "-d", "-e", "+f"], 12, 12),
    ],
)
def test_map_back(hunks: list[str], new_line: int, old_line: int | None) -> None:
    assert map_back(hunks, new_line) == old_line


def test_removed_lines_and_blame_parsing() -> None:
    diff = (
        "diff --git a/x.py b/y.py\nsimilarity index 90%\nrename from x.py\nrename to y.py\n"
        "--- a/x.py\n+++ b/y.py\n@@ -2,2 +2 @@\n-a\n-b\n+c\n@@ -9,0 +9 @@\n+d\n"
        "diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+e\n"
    )
    assert removed_lines(diff) == {"x.py": (2, 3)}
    sha = "f" * 40
    porcelain = (
        f"{sha} 4 2 1\nauthor A\ncommitter-time 1700\nsummary s\nboundary\nfilename old.py\n\tline\n"
        f"{sha} 5 3\nauthor A\ncommitter-time 1700\nsummary s\nfilename old.py\n\tnext\n"
    )
    blamed = parse_blame(porcelain)
    assert [(b.sha, b.path, b.line, b.final, b.time, b.boundary) for b in blamed] == [
        (sha, "old.py", 4, 2, 1700, True),
        (sha, "old.py", 5, 3, 1700, False),
    ]


def test_what_was_shown_is_the_prompt_when_a_model_reviewed() -> None:
    patch = "@@ -1,0 +2,2 @@\n+a\n+b"
    base = ReviewResult(Verdict.APPROVE, "", (), analysed=("p.py", "q.py"))
    assert shown_lines(base, {"p.py": patch, "q.py": None}) == {"p.py": frozenset({2, 3})}
    left_out = dataclasses.replace(base, model_skipped=(Skipped("p.py", "cap"),))
    assert shown_lines(left_out, {"p.py": patch}) == {}
    prompted = dataclasses.replace(base, prompt_lines=frozenset({("p.py", 2), ("other.py", 9)}))
    assert shown_lines(prompted, {"p.py": patch}) == {"p.py": frozenset({2}), "other.py": frozenset({9})}


def finding(
    line: int, severity: Severity = Severity.CONCERN, start: int | None = None, path: str = "p.py"
) -> Finding:
    return Finding(path, line, severity, "r", "m", "fp", start_line=start)


@pytest.mark.parametrize(
    ("found", "outcome"),
    [
        ([finding(10)], Detection.HIT),
        ([finding(13)], Detection.HIT),  # within the tolerance of 3
        ([finding(14)], Detection.MISSED),
        ([finding(20, start=6)], Detection.HIT),  # a range across the target
        ([finding(10, Severity.NIT)], Detection.MISSED),  # nits do not count
        ([finding(10, path="q.py")], Detection.MISSED),
        ([], Detection.MISSED),
    ],
)
def test_score(found: list[Finding], outcome: Detection) -> None:
    shown = {"p.py": frozenset(range(8, 13))}
    assert score([Target("p.py", 10)], found, shown, tolerance=3)[0] is outcome
    # the same target outside what was shown: not visible, whatever was found nearby... unless hit
    hidden = score([Target("p.py", 10)], found, {"p.py": frozenset({1})}, tolerance=3)[0]
    assert hidden is (Detection.HIT if outcome is Detection.HIT else Detection.NOT_VISIBLE)
    assert len(hits_of(found, [Target("p.py", 10)], 3)) == (outcome is Detection.HIT)
