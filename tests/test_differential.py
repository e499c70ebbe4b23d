"""Differential findings: a pull request is blamed only for what it introduced
(``core.differential``, run by ``engine.bounded``). The pure matching, table-driven; then the
real engine (ruff, in the confined child) on each shape of change; then the base-side cache."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from app.review.analyzers import AnalysisInput, AnalyzerOutput, Rule, finding
from app.review.core.differential import identity, preexisting, scopes
from app.review.core.model import ChangedFile, Finding, Severity, Verdict
from app.review.engine.builtin import BuiltinReviewer
from tests.llm_context_jobs import InProcess
from tests.test_review_analyzers import changed
from tests.test_review_engine import RecordingReader, pull

# --- scopes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x = 1\n", [""]),
        ("def f():\n    return 1\n\ny = 2\n", ["f", "f", "f", ""]),
        (
            "class C:\n    def m(self):\n        pass\n    z = 1\n",
            ["C", "C.m", "C.m", "C"],
        ),
        ("async def run():\n    await x\n", ["run", "run"]),
        # A docstring's text at column 0 does not end the function it is in.
        ('def f():\n    """Doc\nat column 0\n"""\n    return 1\n', ["f", "f", "f", "f", "f"]),
        # A comment at column 0 does not end it either.
        ("def f():\n# note\n    return 1\n", ["f", "f", "f"]),
        # A file that does not parse has scopes all the same.
        ("def f(:\n    unicode(1)\n", ["f", "f"]),
        ("def f():\n\tpass\ng = 1\n", ["f", "f", ""]),
    ],
)
def test_scopes(text: str, expected: list[str]) -> None:
    assert list(scopes(text.splitlines(), python=True)) == expected


def test_scopes_outside_python_are_empty() -> None:
    assert scopes(["jobs:", "  def f():"], python=False) == ("", "")


# --- identity and matching ---------------------------------------------------------------------


def at(
    line: int, message: str = "Undefined name `unicode`", severity: Severity = Severity.BLOCKER
) -> Finding:
    return finding("a.py", line, severity, "python/F821", message, f"line {line}")


def test_identity_folds_positions_but_not_names() -> None:
    spans = ("", "f")
    long_line = identity(at(1, "Line too long (97 > 88)"), spans)
    assert long_line == identity(at(1, "Line too long (120 > 88)"), spans)
    assert identity(at(1, "Undefined name `x1`"), spans) != identity(at(1, "Undefined name `x2`"), spans)
    assert identity(at(1), spans) != identity(at(2), spans)  # another scope
    assert identity(at(1), spans) != identity(at(1, severity=Severity.CONCERN), spans)


F = "Undefined name `unicode`"


@pytest.mark.parametrize(
    ("head", "base", "touched", "expected"),
    [
        # A reformatted line: the base held the same finding.
        ([at(1)], [1], {1}, [True]),
        # New: nothing like it at the base.
        ([at(1)], [], {1}, [False]),
        # A line the pull request duplicated: the untouched one is the base's, the copy is new.
        ([at(1), at(2)], [1], {2}, [True, False]),
        # Both touched, one at the base: the first is kept as the base's.
        ([at(1), at(2)], [1], {1, 2}, [True, False]),
        # Another name on a reformatted line is new; the old name is not.
        ([at(1), at(1, "Undefined name `long`")], [1], {1}, [True, False]),
        # The same problem turned more severe is new.
        ([at(1, severity=Severity.BLOCKER)], [("concern", 1)], {1}, [False]),
        # In another scope (a new function) it is new.
        ([at(2)], [1], {2}, [False]),
    ],
)
def test_preexisting(
    head: list[Finding], base: list[object], touched: set[int], expected: list[bool]
) -> None:
    spans = ("", "f", "f")  # row 1 at module level, rows 2-3 in ``f``
    base_ids = []
    for entry in base:
        severity, line = (
            (Severity.CONCERN, entry[1]) if isinstance(entry, tuple) else (Severity.BLOCKER, entry)
        )
        assert isinstance(line, int)
        base_ids.append(identity(at(line, F, severity), ("", "f", "f")))
    assert preexisting(head, spans, base_ids, touched=touched) == expected


# --- the engine, on each shape of change (real ruff, in the child) -------------------------------

SIX_BASE = (
    "import sys\n\nPY2 = sys.version_info[0] == 2\n\nif PY2:\n"
    "    text_type=unicode\n    integer_types=(int,long)\nelse:\n    text_type = str\n\n\n"
    "def ensure_text(s):\n    if isinstance(s,basestring): return s\n    return s\n"
)
SIX_BLACK = (
    "import sys\n\nPY2 = sys.version_info[0] == 2\n\nif PY2:\n"
    "    text_type = unicode\n    integer_types = (int, long)\nelse:\n    text_type = str\n\n\n"
    "def ensure_text(s):\n    if isinstance(s, basestring):\n        return s\n    return s\n"
)
MOVED_BASE = "def a():\n    return unicode(1)\n\n\ndef b():\n    return 2\n"
MOVED_HEAD = "def b():\n    return 2\n\n\ndef a():\n    return unicode(1)\n"
DUP_BASE = "x = 1\ny = unicode(1)\n"
DUP_HEAD = "x = 1\ny = unicode(1)\ny = unicode(1)\n"
FIXED_BASE = "x=1\ny = unicode(1)\n"
FIXED_HEAD = "x = 1\ny = str(1)\n"
NEW_ON_REFORMAT_BASE = "y=unicode(1)\n"
NEW_ON_REFORMAT_HEAD = "y = unicode(1) + long(2)\n"


def renamed(old_path: str, path: str, old: str, new: str) -> ChangedFile:
    file = changed(path, old, new, status="renamed")
    return ChangedFile(
        path=file.path,
        status=file.status,
        patch=file.patch,
        additions=file.additions,
        deletions=file.deletions,
        previous_path=old_path,
    )


@pytest.mark.parametrize(
    ("file", "head", "blamed", "preexisting_count"),
    [
        pytest.param(changed("src/six.py", SIX_BASE, SIX_BLACK), SIX_BLACK, set(), 3, id="formatter"),
        pytest.param(changed("m.py", MOVED_BASE, MOVED_HEAD), MOVED_HEAD, set(), 1, id="moved-function"),
        pytest.param(
            renamed("old/m.py", "new/m.py", SIX_BASE, SIX_BLACK), SIX_BLACK, set(), 3, id="renamed-file"
        ),
        pytest.param(changed("d.py", DUP_BASE, DUP_HEAD), DUP_HEAD, {("d.py", 3)}, 0, id="duplicated-line"),
        pytest.param(changed("f.py", FIXED_BASE, FIXED_HEAD), FIXED_HEAD, set(), 0, id="fixed-by-the-pr"),
        pytest.param(
            changed("n.py", NEW_ON_REFORMAT_BASE, NEW_ON_REFORMAT_HEAD),
            NEW_ON_REFORMAT_HEAD,
            {("n.py", 1)},
            1,
            id="new-finding-on-a-reformatted-line",
        ),
    ],
)
async def test_only_what_the_pull_request_introduced_is_blamed(
    file: ChangedFile, head: str, blamed: set[tuple[str, int]], preexisting_count: int
) -> None:
    result = await BuiltinReviewer().review(pull([file], RecordingReader({file.path: head})))
    assert {(f.path, f.line) for f in result.findings if f.rule == "python/F821"} == blamed
    assert len(result.preexisting) == preexisting_count
    if not blamed:
        assert result.verdict is Verdict.APPROVE
    if preexisting_count:
        were = "was" if preexisting_count == 1 else "were"
        finding_word = "finding" if preexisting_count == 1 else "findings"
        assert (
            f"{preexisting_count} {finding_word} on lines this pull request touched {were} already there"
            in result.summary
        )


async def test_a_new_file_has_no_base_side() -> None:
    result = await BuiltinReviewer().review(
        pull([changed("n.py", None, SIX_BLACK)], RecordingReader({"n.py": SIX_BLACK}))
    )
    assert {f.rule for f in result.findings} == {"python/F821"}
    assert result.preexisting == () and result.verdict is Verdict.REQUEST_CHANGES


# --- the base-side cache -----------------------------------------------------------------------


@dataclass
class Unicode:
    """A differential analyzer, in process: flags each ``unicode`` and records the texts of the
    files it is given (the base sides among them)."""

    name: str = "unicode"
    tools: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = (Rule("test/unicode", Severity.BLOCKER, "unicode"),)
    differential: bool = True
    seen: list[str] = field(default_factory=list)

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        return [f.path for f in files]

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        out = AnalyzerOutput()
        for item in batch.files:
            self.seen.append(item.text or "")
            for number, row in enumerate(item.rows, 1):
                if re.search(r"\bunicode\b", row):
                    out.findings.append(
                        finding(item.path, number, Severity.BLOCKER, "test/unicode", "`unicode`", row)
                    )
        return out


async def test_a_base_side_is_analysed_once_under_the_same_rules() -> None:
    analyzer = Unicode()
    reviewer = BuiltinReviewer([analyzer], boundary=InProcess())
    base, head = "a=unicode(1)\n", "a = unicode(1)\n"
    first = await reviewer.review(pull([changed("a.py", base, head)], RecordingReader({"a.py": head})))
    assert first.findings == () and len(first.preexisting) == 1
    assert analyzer.seen == [head, base]
    # Another round (or another pull request) over the same base side: not analysed again.
    again = "a  =  unicode(1)\n"
    second = await reviewer.review(pull([changed("a.py", base, again)], RecordingReader({"a.py": again})))
    assert second.findings == () and len(second.preexisting) == 1
    assert analyzer.seen == [head, base, again]
    # Other rules (another analyzer set): analysed again.
    other = BuiltinReviewer([analyzer, Unicode(name="other")], boundary=InProcess())
    await other.review(pull([changed("a.py", base, head)], RecordingReader({"a.py": head})))
    assert analyzer.seen.count(base) == 2


# --- prints: a module that printed at the base prints on purpose ---------------------------------

PRINTS_BASE = 'def serve():\n    print( "listening")\n    print("on", 8080 )\n'
PRINTS_BLACK = 'def serve():\n    print("listening")\n    print("on", 8080)\n'


@pytest.mark.parametrize(
    ("base", "head", "printed"),
    [
        (PRINTS_BASE, PRINTS_BLACK, []),  # dummyserver/handlers.py under black: its prints were there
        ("def serve():\n    return 1\n", "def serve():\n    print('x')\n    return 1\n", [2]),
    ],
)
async def test_prints_a_formatter_touched_are_not_the_pull_requests(
    base: str, head: str, printed: list[int]
) -> None:
    file = changed("srv/handlers.py", base, head)
    result = await BuiltinReviewer().review(pull([file], RecordingReader({file.path: head})))
    assert [f.line for f in result.findings if f.rule == "debug/print"] == printed
