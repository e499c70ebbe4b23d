"""Say less, and right (workflows, Dockerfiles, shell, lint configuration): each case from what a
maintainer called wrong or noise on real commits."""

from __future__ import annotations

import pytest

from app.review.analyzers.config_change import alternatives, covers, enabled, turned_off
from app.review.analyzers.pins import Pinning, action_refs, pinned_as_usual, pinning, unquoted
from app.review.analyzers.shell import iterated, split_on_purpose
from app.review.analyzers.workflows import zizmor_severity
from app.review.core.model import Severity
from app.review.core.toolconfig import is_dockerfile

# --- Dockerfiles --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "dockerfile"),
    [
        ("Dockerfile", True),
        ("Dockerfile.dev", True),
        ("docker/Dockerfile-prod", True),
        ("dev.Dockerfile", True),
        ("build/app.dockerfile", True),
        ("Containerfile", True),
        (".dockerignore", False),
        ("Dockerfile.dockerignore", False),  # BuildKit's ignore file for one Dockerfile
        ("foo.dockerignore", False),
        ("docker/Dockerfile.DockerIgnore", False),
        ("app.Dockerfile.dockerignore", False),
        ("docs/dockerfiles.md", False),
    ],
)
def test_is_dockerfile(path: str, dockerfile: bool) -> None:
    assert is_dockerfile(path) is dockerfile


# --- workflows: quoted references and the repository's pinning convention ----------------------


@pytest.mark.parametrize(
    ("feature", "severity"),
    [
        ('"actions/checkout@v4"', Severity.NIT),  # quoted as the file writes it
        ("'actions/setup-python@v5'", Severity.NIT),
        ("actions/checkout@v4", Severity.NIT),
        ('"docker/setup-buildx-action@v3"', Severity.CONCERN),
    ],
)
def test_first_party_tags_are_nits_quoted_or_not(feature: str, severity: Severity) -> None:
    assert zizmor_severity("unpinned-uses", "High", "High", feature) is severity


@pytest.mark.slow
async def test_a_quoted_uses_is_read_as_zizmor_reports_it() -> None:
    from app.review.analyzers.workflows import WorkflowAnalyzer
    from tests.test_review_analyzers import run
    from tests.test_review_linters import reviewed

    steps = [
        '"actions/checkout@v4"\n        with:\n          persist-credentials: false',
        "'actions/setup-python@v5'",
        '"docker/setup-buildx-action@v3"',
    ]
    workflow = WORKFLOW.split("      - uses:")[0] + "".join(f"      - uses: {s}\n" for s in steps)
    output = await run(WorkflowAnalyzer(), reviewed(".github/workflows/ci.yml", workflow))
    assert [(f.rule, f.line, f.severity) for f in output.findings] == [
        ("workflow/unpinned-uses", 8, Severity.NIT),
        ("workflow/unpinned-uses", 11, Severity.NIT),
        ("workflow/unpinned-uses", 12, Severity.CONCERN),  # a new workflow shows no convention
    ]


def test_unquoted() -> None:
    assert unquoted(' "a/b@v1" ') == "a/b@v1" and unquoted("'a/b@v1'") == "a/b@v1"


SHA = "b4ffde65f46336ab88eb53be808477a3936bae11"
TAG_PINNED = [
    "    steps:",
    "      - uses: actions/checkout@v4",  # first party: does not tell the convention
    "      - uses: docker/setup-buildx-action@v3",
    '      - uses: "pypa/gh-action-pypi-publish@release/v1"',
    "        uses: ./local-action",
    "      - uses: docker://alpine:3.19",
]


@pytest.mark.parametrize(
    ("rows", "convention"),
    [
        (TAG_PINNED, Pinning.TAG),
        ([*TAG_PINNED, f"      - uses: codecov/codecov-action@{SHA} # v4"], Pinning.SHA),
        (["      - uses: actions/checkout@v4"], Pinning.UNKNOWN),
        ([], Pinning.UNKNOWN),
    ],
)
def test_pinning_convention(rows: list[str], convention: Pinning) -> None:
    assert pinning(action_refs(rows)) is convention


@pytest.mark.parametrize(
    ("feature", "convention", "author", "usual"),
    [
        # A repository that pins by tag on purpose: a tag pin is its choice (95 lines of noise).
        ("docker/setup-buildx-action@v3", Pinning.TAG, "alice", True),
        ('"docker/login-action@v3"', Pinning.TAG, "alice", True),
        # Where the base pins by sha, a tag pin is the PR's step back.
        ("docker/setup-buildx-action@v3", Pinning.SHA, "alice", False),
        # A dependency bot's bump of an action the base pinned the same way (by tag).
        ("docker/setup-buildx-action@v4", Pinning.SHA, "dependabot[bot]", True),
        ("docker/setup-buildx-action@v4", Pinning.UNKNOWN, "renovate[bot]", True),
        ("evil/new-action@v1", Pinning.UNKNOWN, "dependabot[bot]", False),  # a new action
        ("docker/setup-buildx-action@v4", Pinning.UNKNOWN, "dependabot", False),  # not the bot
        # GitHub's own actions do not tell the convention, yet a bot's bump of one is not even a
        # nit: the 177 findings on the very lines dependabot bumped.
        ("actions/checkout@v5", Pinning.UNKNOWN, "dependabot[bot]", True),
        ('"actions/setup-python@v6"', Pinning.SHA, "renovate[bot]", True),
        ("actions/checkout@v5", Pinning.UNKNOWN, "alice", False),  # a nit, as before
        ("actions/cache@v4", Pinning.UNKNOWN, "dependabot[bot]", False),  # not at the base
    ],
)
def test_pinned_as_usual(feature: str, convention: Pinning, author: str, usual: bool) -> None:
    base = action_refs(
        [
            "      - uses: docker/setup-buildx-action@v3",
            "      - uses: actions/checkout@v4",
            "      - uses: 'actions/setup-python@v5'",
        ]
    )
    assert pinned_as_usual(feature, convention, base, author) is usual


# --- the lint configuration's changes, read right -----------------------------------------------


@pytest.mark.parametrize(
    ("selectors", "code", "covered"),
    [
        (["E"], "E9", True),
        (["E"], "E501", True),
        (["E"], "EM101", False),  # flake8-errmsg, not pycodestyle
        (["F"], "FBT001", False),
        (["ALL"], "S101", True),
        (["PL"], "PLE0101", True),
        (["E5"], "E9", False),
        (["e9"], "E902", True),
    ],
)
def test_covers(selectors: list[str], code: str, covered: bool) -> None:
    assert covers(selectors, code) is covered


@pytest.mark.parametrize(
    ("code", "selected", "ignored", "on"),
    [
        ("E501", ["E"], [], True),
        ("E501", ["E501"], ["E"], True),  # the more specific selector decides
        ("E501", ["E"], ["E501"], False),
        ("E501", ["E501"], ["E501"], False),  # a tie: the ignore wins
        ("E501", ["ALL"], ["E"], False),
        ("E9", ["E4", "E7", "E9", "F"], [], True),
        ("E501", ["E4", "E7", "E9", "F"], [], False),
        ("PLR2004", ["PL"], ["PLR"], False),
    ],
)
def test_enabled(code: str, selected: list[str], ignored: list[str], on: bool) -> None:
    assert enabled(code, selected, ignored) is on


def sel(
    selected: list[str], ignored: tuple[str, ...] | list[str] = ()
) -> tuple[frozenset[str], frozenset[str]]:
    return frozenset(selected), frozenset(ignored)


@pytest.mark.parametrize(
    ("before", "after", "off"),
    [
        # "turns off E9" while the head's select holds "E": nothing is turned off.
        (sel(["E9", "F"]), sel(["E", "F"]), set()),
        (sel(["E", "F"]), sel(["F"]), {"E"}),
        (sel(["E", "F"]), sel(["E", "F"], ["E501"]), {"E501"}),
        (sel(["E", "F"], ["E501"]), sel(["E", "F"], ["E501", "E502"]), {"E502"}),
        (sel(["F"]), sel(["F"], ["E501"]), set()),  # ignoring what was never selected
        # As ruff reads them: the most specific selector wins, an ignore a tie.
        (sel(["E501"]), sel(["E501"], ["E"]), set()),  # E501 stays: more specific than E
        (sel(["E501"], ["E"]), sel(["E"], ["E"]), {"E501"}),  # now E decides, and ignores it
        (sel(["E"], ["E501"]), sel(["E"], ["E5"]), {"E5"}),  # E502... too
        (sel(["E4", "E7", "E9", "F"]), sel(["E", "F"], ["E501"]), set()),  # E501 was never on
        (sel(["ALL"], ["D"]), sel(["ALL"], ["D", "ANN"]), {"ANN"}),
        (sel(["ALL"]), sel(["E", "F"]), {"ALL"}),
        (sel(["F"]), sel(["F"], ["F401 in __init__.py"]), {"F401 in __init__.py"}),
    ],
)
def test_turned_off(
    before: tuple[frozenset[str], frozenset[str]], after: tuple[frozenset[str], frozenset[str]], off: set[str]
) -> None:
    assert turned_off(before, after) == off


BLACK_EXAMPLE = """
(
  /(
      \\.eggs         # exclude a few common directories in the
    | \\.git          # root of the project
    | \\.hg
    | _build
    | build
    | dist
  )/
  | foo.py           # also separately exclude a file named foo.py in
                     # the root of the project
)
"""
PRE_COMMIT = "(?x)^(\n  migrations/.*\n  | vendor/.*\n)$"
BLACK_BASE = "\n/(\n    \\.eggs\n  | \\.git\n  | \\.tox\n  | build\n  | dist\n)/\n"


@pytest.mark.parametrize(
    ("base", "head", "added"),
    [
        (BLACK_BASE, BLACK_BASE.replace("  | dist\n", ""), set()),  # one removed: nothing added
        (BLACK_BASE, BLACK_BASE.replace("    ", "      "), set()),  # re-indented
        (BLACK_BASE, "/(\\.eggs|\\.git|\\.tox|build|dist)/", set()),  # one line now
        (BLACK_BASE, BLACK_BASE.replace("  | dist\n", "  | dist\n  | migrations\n"), {"/migrations/"}),
        ("^legacy/", "^legacy/|^vendor/", {"^vendor/"}),
        # black's own example (nested groups, comments), and the same on one line.
        (BLACK_EXAMPLE, "/(\\.eggs|\\.git|\\.hg|_build|build|dist)/|foo.py", set()),
        (BLACK_EXAMPLE, BLACK_EXAMPLE.replace("  | foo.py", "  | bar.py"), {"bar.py"}),
        # An alternative removed inside a group after a prefix: the scope only shrinks.
        ("^/src/(gen|vendor)/", "^/src/gen/", set()),
        ("^/src/(gen|vendor)/", "^/src/(gen|vendor|legacy)/", {"^/src/legacy/"}),
        # pre-commit's excludes are verbose when they say so.
        (PRE_COMMIT, PRE_COMMIT.replace("  | vendor/.*\n", ""), set()),
        (PRE_COMMIT, PRE_COMMIT.replace("  | vendor/.*\n", "  | vendor/.*\n  | gen/.*\n"), {"^gen/.*$"}),
        # What is not spelt out is compared as written.
        ("(a|b)+c", "(a|b)*c", {"(a|b)*c"}),
        ("files: ^src/", "files: ^(src|lib)/", {"files: ^(src|lib)/"}),
    ],
)
def test_exclude_alternatives(base: str, head: str, added: set[str]) -> None:
    assert alternatives([head]) - alternatives([base]) == added


# --- SC2086 where quoting would break the command -----------------------------------------------


@pytest.mark.parametrize(
    ("line", "flagged", "lists", "on_purpose"),
    [
        ("cmd $FLAGS", "$FLAGS", (), True),
        ("pip install $EXTRA_PACKAGES", "$EXTRA_PACKAGES", (), True),
        ("pytest ${PYTEST_ARGS}", "${PYTEST_ARGS}", (), True),
        ("docker run $DOCKER_OPTS img", "$DOCKER_OPTS", (), True),
        ("echo $name", "$name", (), False),
        ("cp $SRC $DEST", "$SRC", (), False),
        ("rm -rf $TARGET_DIR", "$TARGET_DIR", (), False),
        # A list the script iterates itself (for f in $files) is the same list elsewhere.
        ("ruff check $files", "$files", ("files",), True),
        ("ruff check $files", "$files", (), False),
        ("cp $files /tmp", "$files", ("changed",), False),
        # A numeric test's operand: a number neither splits nor globs.
        ("if [ $count -gt 0 ]; then", "$count", (), True),
        ("[ 0 -lt $retries ] && retry", "$retries", (), True),
        ("test $# -eq 2 || exit 1", "$#", (), False),  # not a variable's name: not SC2086's case
        ('while [ "$i" -le $max ]; do', "$max", (), True),
        ("if [ $name = main ]; then", "$name", (), False),  # a string test: quoting matters
        ("if [ $dir -nt $out ]; then", "$dir", (), False),  # -nt compares files
    ],
)
def test_split_on_purpose(line: str, flagged: str, lists: tuple[str, ...], on_purpose: bool) -> None:
    column = line.index(flagged) + 1
    entry = {"column": column, "endColumn": column + len(flagged)}
    assert split_on_purpose(entry, line, frozenset(lists)) is on_purpose


@pytest.mark.parametrize(
    ("script", "lists"),
    [
        ("files=$(git ls-files)\nfor f in $files; do\n  echo $f\ndone\n", {"files"}),
        ("for pkg in ${PKGS} $EXTRA\ndo\n  pip install $pkg\ndone\n", {"PKGS", "EXTRA"}),
        ('for f in "$files"; do echo; done\n', set()),  # quoted: one word, not a list
        ("for f in $(ls $dir); do echo; done\n", set()),
        ("for f in a b c; do echo $f; done  # for x in $y\n", set()),  # a comment
        ("if ok; then for f in $LIST; do echo; done; fi\n", {"LIST"}),
    ],
)
def test_iterated(script: str, lists: set[str]) -> None:
    assert iterated(script) == lists


@pytest.mark.slow
async def test_sc2086_where_quoting_would_break_the_script_is_not_reported() -> None:
    from app.review.analyzers.shell import ShellAnalyzer
    from tests.test_review_analyzers import run
    from tests.test_review_linters import reviewed

    script = (
        "#!/bin/bash\n"
        "files=$(git diff --name-only)\n"
        'for f in $files; do echo "$f"; done\n'
        "ruff check $files\n"  # 4: the list the script iterates
        "count=$(wc -l < list)\n"
        "if [ $count -gt 0 ]; then echo many; fi\n"  # 6: a number
        "pytest $PYTEST_ARGS\n"  # 7: a list by its name
        "cp $SRC /tmp\n"  # 8: a path: quote it
    )
    output = await run(ShellAnalyzer(), reviewed("ci/check.sh", script))
    assert [(f.rule, f.line) for f in output.findings] == [("shell/SC2086", 8)]


# --- through the engine, with zizmor ------------------------------------------------------------

WORKFLOW = (
    "name: ci\non: [push]\npermissions: {}\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n"
    "      - uses: actions/checkout@v4\n        with:\n          persist-credentials: false\n"
    "      - uses: docker/setup-buildx-action@REF\n"
)
ADDED_STEP = "      - uses: docker/login-action@v3\n"


@pytest.mark.parametrize(("base_ref", "flagged"), [("v3", False), (SHA, True)])
async def test_a_tag_pin_where_the_repository_pins_by_tag_is_not_a_finding(
    base_ref: str, flagged: bool
) -> None:
    from app.review.engine.builtin import BuiltinReviewer
    from tests.test_review_analyzers import changed
    from tests.test_review_engine import RecordingReader, pull

    path = ".github/workflows/ci.yml"
    base = WORKFLOW.replace("REF", base_ref)
    head = base + ADDED_STEP
    result = await BuiltinReviewer().review(pull([changed(path, base, head)], RecordingReader({path: head})))
    unpinned = [f for f in result.findings if f.rule == "workflow/unpinned-uses" and f.line == 12]
    assert bool(unpinned) is flagged


CACHED_BASE = WORKFLOW.replace("REF", "v3") + f"      - uses: codecov/codecov-action@{SHA}\n"
INJECTION = "      - run: echo ${{ github.event.pull_request.title }}\n"


async def test_the_base_side_is_reported_whatever_the_author() -> None:
    """A base side's findings are cached by its text across pull requests: a dependency bot's
    pull request must not leave out of them the tag pins it is excused, or another author's
    pull request on the same base is blamed for a tag pin that stood there."""
    from dataclasses import replace

    from app.review.engine.builtin import BuiltinReviewer
    from tests.test_review_analyzers import changed
    from tests.test_review_engine import RecordingReader, pull

    path = ".github/workflows/ci.yml"
    reviewer = BuiltinReviewer()
    # The bot's pull request: something on a line it adds, so its base side is analysed (and cached).
    head = CACHED_BASE + INJECTION
    context = replace(
        pull([changed(path, CACHED_BASE, head)], RecordingReader({path: head})),
        author_login="dependabot[bot]",
    )
    first = await reviewer.review(context)
    assert any(f.rule == "workflow/template-injection" for f in first.findings)
    # Another author comments the tag pin that stood at the base (the base pins by sha, too).
    head = CACHED_BASE.replace("setup-buildx-action@v3\n", "setup-buildx-action@v3  # the builder\n")
    second = await reviewer.review(pull([changed(path, CACHED_BASE, head)], RecordingReader({path: head})))
    assert not [f for f in second.findings if f.rule == "workflow/unpinned-uses"]
    assert [f.line for f in second.preexisting if f.rule == "workflow/unpinned-uses"] == [11]


@pytest.mark.parametrize(("name", "login"), [("dependabot[bot]", "dependabot[bot]"), ("Alice Liddell", None)])
async def test_the_local_mode_names_an_apps_commits_by_its_login(
    tmp_path: object, name: str, login: str | None
) -> None:
    """``review --git``: a dependency bot's commit is its pull request, by its author."""
    import subprocess
    from pathlib import Path

    from app.review.measure.local import context_from_git

    repo = Path(str(tmp_path)) / "repo"
    repo.mkdir()

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "x@example.com")
    git("config", "user.name", name)
    (repo / "a.txt").write_text("1\n")
    git("add", "-A")
    git("commit", "-qm", "one")
    (repo / "a.txt").write_text("2\n")
    git("commit", "-qam", "two")
    context = await context_from_git(repo, "HEAD~1", "HEAD")
    assert context.author_login == login


# starlette #2919: a job added to a workflow whose jobs all run on the default permissions
NO_PERMISSIONS = (
    "name: Test Suite\non:\n  push:\n    branches: [master]\n  pull_request:\n    branches: [master]\n"
    "jobs:\n  tests:\n    runs-on: ubuntu-latest\n    steps:\n"
    "      - uses: actions/checkout@v4\n        with:\n          persist-credentials: false\n"
    "      - run: pytest\n"
)
CHECK_JOB = "  check:\n    needs: [tests]\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo done\n"


@pytest.mark.parametrize(
    ("base", "flagged"),
    [
        (NO_PERMISSIONS, False),  # the workflow's own choice: the default permissions
        (NO_PERMISSIONS.replace("jobs:\n", "permissions:\n  contents: read\njobs:\n"), False),  # set at top
        (
            NO_PERMISSIONS.replace(
                "    steps:\n      - uses", "    permissions: {}\n    steps:\n      - uses", 1
            ),
            True,  # the base's jobs set theirs: the new job's default is a step back
        ),
    ],
)
async def test_a_job_on_the_default_permissions_where_the_workflow_sets_none(
    base: str, flagged: bool
) -> None:
    from app.review.engine.builtin import BuiltinReviewer
    from tests.test_review_analyzers import changed
    from tests.test_review_engine import RecordingReader, pull

    path = ".github/workflows/test-suite.yml"
    head = base + CHECK_JOB
    result = await BuiltinReviewer().review(pull([changed(path, base, head)], RecordingReader({path: head})))
    defaulted = [
        f
        for f in result.findings
        if f.rule == "workflow/excessive-permissions" and "default permissions" in f.message
    ]
    assert bool(defaulted) is flagged
