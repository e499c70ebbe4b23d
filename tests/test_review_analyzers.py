"""The built-in analyzers, one by one: positives, and the negatives that keep them quiet.

Patches are real ``git diff`` output (see ``test_review_diff``). Credentials are assembled at run
time from a seeded generator, so this file holds none a scanner (ours included) would flag.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import string
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from app.review.analyzers import AnalysisInput, Analyzer, AnalyzerOutput, FileUnderReview, fingerprint
from app.review.analyzers.conflicts import ConflictMarkerAnalyzer, conflict_lines
from app.review.analyzers.debug import DebugAnalyzer, is_print_exempt
from app.review.analyzers.hygiene import HygieneAnalyzer
from app.review.analyzers.python import PythonAnalyzer, severity_for, single_line_fix
from app.review.analyzers.ruff_runner import RuffUnavailableError, find_ruff, run_ruff
from app.review.analyzers.secret_tokens import base62_crc32, shannon_entropy
from app.review.analyzers.secrets import SecretsAnalyzer, redact, scan_lines
from app.review.core.diff import PatchLines, parse_patch
from app.review.core.lintconfig import lint_config
from app.review.core.model import ChangedFile, FileContent, Finding, RepoTree, ReviewSettings, Severity
from tests.test_review_diff import git_patch

# --- helpers -------------------------------------------------------------------------------------


def changed(path: str, old: str | None, new: str, status: str | None = None) -> ChangedFile:
    patch = git_patch(old, new, name=Path(path).name)
    body = [line for line in patch.split("\n") if not line.startswith("@@")]
    return ChangedFile(
        path=path,
        status=status or ("added" if old is None else "modified"),
        patch=patch,
        additions=sum(1 for line in body if line.startswith("+")),
        deletions=sum(1 for line in body if line.startswith("-")),
    )


def content(text: str) -> FileContent:
    return FileContent(text=text, size=len(text.encode()))


def under_review(path: str, old: str | None, new: str, *, read: bool = False) -> FileUnderReview:
    file = changed(path, old, new)
    return FileUnderReview(file, parse_patch(file.patch), content(new) if read else None)


async def run(
    analyzer: Analyzer,
    *files: FileUnderReview,
    unpatched: Sequence[FileUnderReview] = (),
    extra: dict[str, FileContent | None] | None = None,
    settings: ReviewSettings | None = None,
    tree: RepoTree | None = None,
    configs: dict[str, FileContent | None] | None = None,
) -> AnalyzerOutput:
    """``extra``: more of the head's files; ``configs``: the linters' configuration, read at the
    base (as the engine reads it)."""
    contents: dict[str, FileContent | None] = {f.path: f.content for f in (*files, *unpatched)}
    contents.update(extra or {})
    batch = AnalysisInput(
        tuple(files),
        tuple(unpatched),
        contents,
        settings or ReviewSettings(),
        tree=tree,
        lint=lint_config({**contents, **(configs or {})}),
        configs=configs or {},
    )
    return await analyzer.analyse(batch)


def rules_at(findings: Sequence[Finding]) -> set[tuple[str, int]]:
    return {(f.rule, f.line) for f in findings}


_RNG = random.Random(20240501)


def _random(alphabet: str, length: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(length))


ALNUM = string.ascii_letters + string.digits
_GITHUB_BODY = _random(ALNUM, 30)
GITHUB_TOKEN = "ghp_" + _GITHUB_BODY + base62_crc32(_GITHUB_BODY)  # with its checksum, as GitHub mints them
GITHUB_PAT = "github_pat_" + _random(ALNUM + "_", 82)
AWS_KEY = "AKIA" + _random(string.ascii_uppercase + string.digits, 16)
SLACK_TOKEN = f"xoxb-{_random(string.digits, 12)}-{_random(string.digits, 13)}-{_random(ALNUM, 24)}"
GENERIC = _random(ALNUM, 28)


def ruff_version_text() -> str:
    import subprocess

    return subprocess.run(
        [*find_ruff(), "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[1]


# --- python (ruff) -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "severity"),
    [
        ("invalid-syntax", Severity.BLOCKER),
        (None, Severity.BLOCKER),
        ("E999", Severity.BLOCKER),
        ("F821", Severity.BLOCKER),
        ("F822", Severity.BLOCKER),
        ("F823", Severity.BLOCKER),
        ("F811", Severity.CONCERN),
        ("F632", Severity.CONCERN),
        ("F601", Severity.CONCERN),
        ("F502", Severity.CONCERN),
        ("F509", Severity.CONCERN),
        ("F525", Severity.CONCERN),
        ("F707", Severity.CONCERN),
        ("F401", Severity.NIT),
        ("F841", Severity.NIT),
        ("E501", Severity.NIT),
    ],
)
def test_ruff_codes_map_to_severities(code: str | None, severity: Severity) -> None:
    assert severity_for(code) is severity


@pytest.mark.slow
async def test_ruff_runs_once_over_all_python_files_with_the_default_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[Any, ...]] = []
    real = asyncio.create_subprocess_exec

    async def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return await real(*args, **kwargs)

    monkeypatch.setattr(asyncio, "create_subprocess_exec", recording)
    old_app = "import sys\n\n\ndef main():\n    return sys.argv\n"
    new_app = (
        "import os\nimport sys\n\n\ndef main():\n    return sys.argv\n\n\n"
        "def other():\n    return missing_name\n\n\ndef dup():\n    pass\n\n\ndef dup():\n    pass\n"
    )
    broken = "x = 1\ndef f(:\n    pass\nclass (:\n"
    output = await run(
        PythonAnalyzer(),
        under_review("pkg/app.py", old_app, new_app, read=True),
        under_review("pkg/broken.py", None, broken, read=True),
        under_review("pkg/types.pyi", None, "def f() -> Undefined: ...\n", read=True),
        under_review("README.md", None, "not python\n", read=True),
        extra={"pyproject.toml": content("[project]\nname = 'x'\n"), "ruff.toml": None, ".ruff.toml": None},
    )
    assert len([c for c in calls if "check" in c]) == 1
    by_rule = {(f.path, f.rule): f for f in output.findings}
    assert by_rule[("pkg/app.py", "python/F401")].severity is Severity.NIT
    assert by_rule[("pkg/app.py", "python/F401")].line == 1
    assert by_rule[("pkg/app.py", "python/F821")].severity is Severity.BLOCKER
    assert by_rule[("pkg/app.py", "python/F821")].line == 10
    assert "missing_name" in by_rule[("pkg/app.py", "python/F821")].message
    assert by_rule[("pkg/app.py", "python/F811")].severity is Severity.CONCERN
    assert by_rule[("pkg/types.pyi", "python/F821")].line == 1
    syntax = [f for f in output.findings if f.rule == "python/syntax-error"]
    assert [(f.path, f.line, f.severity) for f in syntax] == [("pkg/broken.py", 2, Severity.BLOCKER)]
    assert not any(f.path == "README.md" for f in output.findings)
    assert not output.incomplete
    assert output.notes == [
        f"Python checked by ruff {ruff_version_text()} with revbot's default rules (E9, F)"
    ]


async def test_the_repository_ruff_toml_replaces_the_default_rules() -> None:
    text = "import os\nshort = 1\nthis_line_is_longer_than_twenty = 2\n"
    config = content('line-length = 20\n[lint]\nselect = ["E501"]\n')
    output = await run(
        PythonAnalyzer(),
        under_review("m.py", None, text, read=True),
        extra={"ruff.toml": config, ".ruff.toml": None, "pyproject.toml": None},
    )
    assert rules_at(output.findings) == {("python/E501", 3)}  # and no F401 for line 1
    assert output.findings[0].severity is Severity.NIT


async def test_a_pyproject_with_tool_ruff_is_honoured() -> None:
    text = "import os\nthis_line_is_longer_than_twenty = 2\n"
    pyproject = content(
        '[project]\nname = "x"\n\n[tool.ruff]\nline-length = 20\n[tool.ruff.lint]\nselect = ["E501"]\n'
    )
    output = await run(
        PythonAnalyzer(), under_review("m.py", None, text, read=True), extra={"pyproject.toml": pyproject}
    )
    assert rules_at(output.findings) == {("python/E501", 2)}


async def test_no_configuration_outside_the_temporary_directory_leaks_in(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A hostile configuration in every parent of the temporary directory.
    (tmp_path / "ruff.toml").write_text('line-length = 10\n[lint]\nselect = ["ALL"]\n')
    (tmp_path / "pyproject.toml").write_text('[tool.ruff.lint]\nselect = ["ALL"]\n')
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    text = '"""Doc."""\n\nVALUE = "a fairly long line that E501 would flag at length 10"\n'
    output = await run(PythonAnalyzer(), under_review("m.py", None, text, read=True))
    assert output.findings == []


async def test_a_configuration_ruff_rejects_falls_back_to_the_defaults() -> None:
    config = content('[lint]\nselect = ["NOPE123"]\n')
    output = await run(
        PythonAnalyzer(),
        under_review("m.py", None, "import os\n", read=True),
        extra={"ruff.toml": config},
    )
    assert rules_at(output.findings) == {("python/F401", 1)}
    assert any("default rules" in note for note in output.notes)


async def test_safe_single_line_fixes_become_suggestions() -> None:
    text = 'import os\nimport sys\n\nprint(sys.argv, f"plain")\n'
    output = await run(PythonAnalyzer(), under_review("m.py", None, text, read=True))
    by_rule = {f.rule: f for f in output.findings}
    assert by_rule["python/F401"].suggestion == ""  # delete `import os`
    assert by_rule["python/F541"].suggestion == 'print(sys.argv, "plain")'


def test_single_line_fix_only_for_safe_edits_within_the_line() -> None:
    def edit(content: str, start: tuple[int, int], end: tuple[int, int]) -> dict[str, Any]:
        return {
            "content": content,
            "location": {"row": start[0], "column": start[1]},
            "end_location": {"row": end[0], "column": end[1]},
        }

    def diag(applicability: str, *edits: dict[str, Any]) -> dict[str, Any]:
        return {"fix": {"applicability": applicability, "edits": list(edits)}}

    line = "x = f'abc'"
    assert single_line_fix(diag("safe", edit("", (3, 5), (3, 6))), 3, line) == "x = 'abc'"
    assert single_line_fix(diag("safe", edit("", (3, 1), (4, 1))), 3, line) == ""
    assert single_line_fix(diag("unsafe", edit("", (3, 5), (3, 6))), 3, line) is None
    assert single_line_fix(diag("safe", edit("", (3, 1), (5, 1))), 3, line) is None  # spans 2 lines
    assert single_line_fix(diag("safe", edit("", (2, 1), (3, 1))), 3, line) is None  # another line
    assert single_line_fix({"fix": None}, 3, line) is None


async def test_files_ruff_cannot_see_are_reported_as_not_checked() -> None:
    missing = FileUnderReview(
        changed("gone.py", None, "x = 1\n"), parse_patch(git_patch(None, "x = 1\n")), None
    )
    huge = FileUnderReview(
        changed("huge.py", None, "x = 1\n"), parse_patch(git_patch(None, "x = 1\n")), FileContent(None, 10**8)
    )
    output = await run(PythonAnalyzer(), missing, huge)
    assert {s.path: s.reason for s in output.skipped} == {
        "gone.py": "Python checks not run: content not available at the head commit",
        "huge.py": "Python checks not run: content too large to read",
    }
    assert output.incomplete


@pytest.mark.slow
async def test_a_ruff_that_hangs_is_killed_and_the_files_marked_unchecked() -> None:
    sleeper = PythonAnalyzer(time_limit=0.3, command=[sys.executable, "-c", "import time; time.sleep(30)"])
    output = await run(sleeper, under_review("m.py", None, "x = 1\n", read=True))
    assert output.incomplete
    assert output.findings == []
    assert [s.reason for s in output.skipped] == ["Python checks not run: ruff timed out after 0.3 s"]


async def test_a_missing_ruff_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(RuffUnavailableError, match="could not be started"):
        await run_ruff({"m.py": "x = 1\n"}, None, command=[str(tmp_path / "no-such-ruff")])
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(RuffUnavailableError, match="ruff is not installed"):
        find_ruff()


# --- secrets -------------------------------------------------------------------------------------


def _pem_lines(pem: str) -> dict[int, str]:
    return dict(enumerate(pem.strip().split("\n"), start=1))


@pytest.mark.parametrize(
    ("path", "line", "rule", "secret"),
    [
        ("app/settings.py", f'GITHUB_TOKEN = "{GITHUB_TOKEN}"', "secrets/github-token", GITHUB_TOKEN),
        ("config.json", f'  "auth": "{GITHUB_PAT}",', "secrets/github-token", GITHUB_PAT),
        ("deploy/.env", f"AWS_ACCESS_KEY_ID={AWS_KEY}", "secrets/aws-access-key", AWS_KEY),
        ("notify.js", f"const hook = '{SLACK_TOKEN}';", "secrets/slack-token", SLACK_TOKEN),
        ("app/settings.py", f'STRIPE_SECRET = "{GENERIC}"', "secrets/generic", GENERIC),
        ("app/settings.py", f'API_TOKEN: str = "{GENERIC}"', "secrets/generic", GENERIC),
        ("client.ts", f'const apiToken: string = "{GENERIC}";', "secrets/generic", GENERIC),
        ("config.json", f'  "api_key": "{GENERIC}",', "secrets/generic", GENERIC),
        ("config.yml", f'password: "{GENERIC}"', "secrets/generic", GENERIC),
        ("config.yml", f"  db_password: {GENERIC}", "secrets/generic", GENERIC),
        (".env", f"export DB_PASSWORD={GENERIC}", "secrets/generic", GENERIC),
        ("app/db.py", f'connect(host="db", password="{GENERIC}")', "secrets/generic", GENERIC),
        ("app/x.php", f"'client_secret' => '{GENERIC}',", "secrets/generic", GENERIC),
    ],
)
async def test_secrets_are_found_and_never_repeated(path: str, line: str, rule: str, secret: str) -> None:
    [hit] = scan_lines(path, {7: line})
    assert (hit.rule, hit.line) == (rule, 7)
    output = await run(SecretsAnalyzer(), under_review(path, None, f"{line}\n"))
    [found] = output.findings
    assert found.severity is Severity.BLOCKER and found.rule == rule
    for field in dataclasses.fields(Finding):
        value = str(getattr(found, field.name))
        assert secret not in value
        assert secret[4:12] not in value  # not even a middle part
    shown = found.message.split("`")[-2]
    assert shown.endswith("\u2026") and len(shown) <= 5 and secret.startswith(shown[:-1])


def test_private_keys_with_their_material_are_found(private_key_pem: str) -> None:
    hits = scan_lines("deploy/key.pem", _pem_lines(private_key_pem))
    assert [(h.rule, h.line) for h in hits] == [("secrets/private-key", 1)]
    one_line = '{"private_key": "' + private_key_pem.replace("\n", "\\n") + '"}'
    assert [h.rule for h in scan_lines("sa.json", {1: one_line})] == ["secrets/private-key"]
    for kind in ("RSA ", "EC ", "DSA ", "OPENSSH ", "ENCRYPTED "):
        pem = private_key_pem.replace("BEGIN PRIVATE", f"BEGIN {kind}PRIVATE")
        assert [h.kind for h in scan_lines("k", _pem_lines(pem))] == [f"{kind}private key"]
    pgp = {
        1: "-----BEGIN PGP PRIVATE KEY BLOCK-----",
        2: "Version: GnuPG v2",
        3: "",
        4: "lQOYBF" + _random(ALNUM, 58),
    }
    assert [h.kind for h in scan_lines("k.asc", pgp)] == ["PGP private key"]


async def test_secret_findings_redact_even_the_private_key(private_key_pem: str) -> None:
    text = private_key_pem
    output = await run(SecretsAnalyzer(), under_review("deploy/key.pem", None, text))
    [found] = output.findings
    body = text.strip().split("\n")[1]
    assert body not in found.message and "PRIVATE KEY-----" not in found.message


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("app/settings.py", 'API_TOKEN = os.environ["API_TOKEN"]'),
        ("app/settings.py", 'API_TOKEN = os.getenv("API_TOKEN", "fallback-value-AbC123")'),
        ("app/settings.py", 'PASSWORD = "changeme"'),
        ("app/settings.py", 'API_KEY = "<your-api-key-goes-here>"'),
        ("app/settings.py", 'API_KEY = "${API_KEY_FROM_VAULT_1}"'),
        ("deploy.yml", "  token: ${{ secrets.DEPLOY_TOKEN }}"),
        ("app/settings.py", 'AUTH_TOKEN = "xxxxxxxxxxxxxxxxxxxxxxxx"'),
        ("app/settings.py", 'SECRET_KEY = "django-insecure-4f$k2m9q0zx7wq1b3"'),
        ("app/settings.py", 'API_KEY = "EXAMPLEkey1234567890abcdef"'),
        ("app/settings.py", 'REQUEST_TOKEN = "123e4567-e89b-12d3-a456-426614174000"'),
        ("app/settings.py", 'PASSWORD_FIELD = "password_confirmation_x"'),
        ("app/settings.py", 'TOKEN_ENV = "GITHUB_TOKEN_FOR_RELEASES"'),
        ("app/settings.py", f'TOKEN_URL = "https://auth.example.org/{GENERIC}"'),
        ("app/auth.py", f'if token == "{GENERIC}":'),
        ("app/auth.py", 'password = "Please enter your password here"'),
        ("app/auth.py", 'password = f"{prefix}{GENERATED_SUFFIX_123}"'),
        ("tests/test_auth.py", f'password = "{GENERIC}"'),
        ("app/tests/fixtures.py", f'API_KEY = "{GENERIC}"'),
        ("docs/setup.md", f'API_KEY = "{GENERIC}"'),
        ("app/settings.py", 'AWS_KEY = "AKIAIOSFODNN7EXAMPLE"'),
        ("app/settings.py", 'TOKEN = "ghp_' + "x" * 36 + '"'),
        ("app/settings.py", 'TOKEN = "ghp_' + "0" * 36 + '"'),
        ("app/slack.py", 'SLACK = "xoxb-your-token-here"'),
        ("app/keys.py", 'if pem.startswith("-----BEGIN RSA PRIVATE KEY-----"):'),
        ("app/keys.py", 'HEADER = "-----BEGIN PRIVATE KEY-----"'),
        ("app/hashes.py", f'content_hash = "{GENERIC}"'),
        ("app/version.py", f'__commit__ = "{GENERIC}"'),
    ],
)
def test_secret_negatives(path: str, line: str) -> None:
    assert scan_lines(path, {1: line, 2: "    return True"}) == []


def test_only_the_specific_rule_fires_on_a_line_with_a_known_token() -> None:
    hits = scan_lines("s.py", {1: f'GITHUB_TOKEN = "{GITHUB_TOKEN}"'})
    assert [h.rule for h in hits] == ["secrets/github-token"]


def test_entropy_and_redaction() -> None:
    assert shannon_entropy("aaaa") == 0
    assert shannon_entropy("abcd") == 2
    assert redact("ghp_abcdefghijklmnop") == "ghp_\u2026"
    assert redact("short") == "s\u2026"


# --- conflict markers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("added", "expected"),
    [
        (
            {2: "<<<<<<< HEAD", 3: "ours", 4: "=======", 5: "theirs", 6: ">>>>>>> feature"},
            [(2, "<<<<<<<"), (4, "======="), (6, ">>>>>>>")],
        ),
        (
            {1: "<<<<<<< ours", 2: "||||||| base", 3: "=======", 4: ">>>>>>>"},
            [(1, "<<<<<<<"), (2, "|||||||"), (3, "======="), (4, ">>>>>>>")],
        ),
        ({1: "Title", 2: "======="}, []),  # a Markdown/RST underline
        ({1: "<<<<<<<<<< arrows", 2: "=========="}, []),
        ({1: "    <<<<<<< HEAD"}, []),  # not at line start
        ({1: "x = a <<<<<<< b"}, []),
        ({5: ">>>>>>> 1a2b3c (commit)"}, [(5, ">>>>>>>")]),
    ],
)
def test_conflict_markers(added: dict[int, str], expected: list[tuple[int, str]]) -> None:
    assert conflict_lines(added) == expected


async def test_conflict_markers_are_blockers_on_their_lines() -> None:
    old = "# widgets\n"
    new = "# widgets\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> feature\n"
    output = await run(ConflictMarkerAnalyzer(), under_review("README.md", old, new))
    assert rules_at(output.findings) == {
        ("conflict-marker", 2),
        ("conflict-marker", 4),
        ("conflict-marker", 6),
    }
    assert {f.severity for f in output.findings} == {Severity.BLOCKER}


# --- debugging leftovers -------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "line", "expected"),
    [
        ("pkg/mod.py", "    breakpoint()", {("debug/breakpoint", Severity.CONCERN)}),
        ("pkg/mod.py", "    import pdb; pdb.set_trace()", {("debug/pdb", Severity.CONCERN)}),
        ("pkg/mod.py", "    import ipdb", {("debug/pdb", Severity.CONCERN)}),
        ("pkg/mod.py", "from pdb import set_trace", {("debug/pdb", Severity.CONCERN)}),
        ("pkg/mod.py", "    ipdb.set_trace()", {("debug/pdb", Severity.CONCERN)}),
        ("pkg/mod.py", '    print("value", x)', {("debug/print", Severity.CONCERN)}),
        ("src/app.js", "  console.log(state);", {("debug/console-log", Severity.NIT)}),
        ("src/app.tsx", "  debugger;", {("debug/debugger", Severity.CONCERN)}),
        ("src/App.vue", "    debugger", {("debug/debugger", Severity.CONCERN)}),
        (
            "src/app.mjs",
            "if (x) { debugger; console.log(x) }",
            {
                ("debug/debugger", Severity.CONCERN),
                ("debug/console-log", Severity.NIT),
            },
        ),
        # negatives
        ("pkg/mod.py", "    # breakpoint() while debugging", set()),
        ("pkg/mod.py", '    msg = "call breakpoint() here"', set()),
        ("pkg/mod.py", "    self.breakpoint()", set()),
        ("pkg/mod.py", "def breakpoint(self):", set()),
        ("pkg/mod.py", "    pprint(x)", set()),
        ("pkg/mod.py", "    blueprint(x)", set()),
        ("pkg/mod.py", "    printer.print(x)", set()),
        ("pkg/mod.py", "import pdbx", set()),
        ("tests/test_mod.py", '    print("debug")', set()),
        ("pkg/mod_test.py", '    print("debug")', set()),
        ("conftest.py", '    print("debug")', set()),
        ("scripts/release.py", '    print("done")', set()),
        ("pkg/__main__.py", '    print("usage")', set()),
        ("setup.py", '    print("x")', set()),
        ("docs/conf.py", '    print("x")', set()),
        ("pkg/mod.py", "    logger.debug('console.log(x)')", set()),
        ("src/app.js", "  // console.log(state);", set()),
        ("src/app.js", '  const s = "debugger;";', set()),
        ("src/app.js", "  const debuggerEnabled = true;", set()),
        ("src/app.js", "  myconsole.log(x);", set()),
        ("src/app.py.txt", "breakpoint()", set()),
        ("src/app.rb", "debugger", set()),
    ],
)
async def test_debug_leftovers(path: str, line: str, expected: set[tuple[str, Severity]]) -> None:
    output = await run(DebugAnalyzer(), under_review(path, "first = 1\n", f"first = 1\n{line}\n"))
    assert {(f.rule, f.severity) for f in output.findings} == expected
    assert all(f.line == 2 for f in output.findings)


async def test_the_tokenizer_ignores_docstrings_when_the_content_was_read() -> None:
    old = 'def f():\n    """Doc.\n    """\n    return 1\n'
    new = 'def f():\n    """Doc.\n\n    Call breakpoint() or print(x) to debug.\n    """\n    return 1\n'
    read = await run(DebugAnalyzer(), under_review("pkg/mod.py", old, new, read=True))
    assert read.findings == []


async def test_prints_in_modules_with_a_main_guard_are_fine_when_the_content_was_read() -> None:
    new = 'import sys\n\n\ndef main():\n    print(sys.argv)\n\n\nif __name__ == "__main__":\n    main()\n'
    read = await run(DebugAnalyzer(), under_review("pkg/runner.py", None, new, read=True))
    assert read.findings == []
    unread = await run(DebugAnalyzer(), under_review("pkg/runner.py", None, new))
    assert rules_at(unread.findings) == {("debug/print", 5)}


@pytest.mark.parametrize(
    ("new", "line", "suggestion"),
    [
        ("def f():\n    x = 1\n    breakpoint()\n    return x\n", 3, ""),
        ("def f():\n    x = 1\n    pdb.set_trace()  # look\n    return x\n", 3, ""),
        ("def f():\n    x = 1; breakpoint()\n    return x\n", 2, None),
        ("def f():\n    breakpoint()\n", 2, None),  # deleting it would leave an empty body
        ("if x:\n    breakpoint()\ny = 2\n", 2, None),
    ],
)
async def test_lone_debugger_calls_come_with_a_deletion(new: str, line: int, suggestion: str | None) -> None:
    output = await run(DebugAnalyzer(), under_review("pkg/mod.py", None, new, read=True))
    [found] = output.findings
    assert found.line == line
    assert found.suggestion == suggestion


def test_print_exemptions_by_path() -> None:
    exempt = ["tests/x.py", "test/x.py", "pkg/test_x.py", "pkg/x_test.py", "conftest.py", "bin/run.py"]
    exempt += ["tools/gen.py", "examples/demo.py", "docs/conf.py", "manage.py", "noxfile.py", "tasks.py"]
    assert all(is_print_exempt(p) for p in exempt)
    assert not any(is_print_exempt(p) for p in ["pkg/mod.py", "pkg/testing_utils.py", "app/tools.py"])


# --- hygiene -------------------------------------------------------------------------------------


async def test_whitespace_errors_follow_git_diff_check() -> None:
    old = "a\nb\n"
    new = "a \nb\n \tc\n\t d\ne\t\nf\n\n\n"
    output = await run(HygieneAnalyzer(), under_review("notes.txt", old, new))
    found = {f.rule: f for f in output.findings}
    assert set(found) == {"hygiene/trailing-whitespace", "hygiene/space-before-tab", "hygiene/blank-at-eof"}
    assert found["hygiene/trailing-whitespace"].message == "trailing whitespace on lines 1, 5"
    assert found["hygiene/trailing-whitespace"].line == 1
    assert found["hygiene/space-before-tab"].message == "space before tab in indent on line 3"
    assert found["hygiene/blank-at-eof"].line == 7
    assert all(f.severity is Severity.NIT and not f.inline for f in output.findings)


async def test_blank_lines_inside_the_file_are_not_blank_at_eof() -> None:
    output = await run(HygieneAnalyzer(), under_review("n.txt", "a\nb\nc\nd\n", "a\n\n\nb\nc\nd\n"))
    assert output.findings == []


async def test_a_changed_last_line_without_newline_is_reported() -> None:
    output = await run(HygieneAnalyzer(), under_review("n.txt", "a\nb\n", "a\nb\nc"))
    assert rules_at(output.findings) == {("hygiene/no-newline-at-eof", 3)}
    untouched = await run(HygieneAnalyzer(), under_review("n.txt", "a\nb\nc", "A\nb\nc"))
    assert untouched.findings == []  # the missing newline was already there


async def test_crlf_files_are_not_trailing_whitespace_but_a_stray_cr_is() -> None:
    crlf = await run(HygieneAnalyzer(), under_review("w.txt", "x\r\ny\r\n", "x\r\ny\r\nz\r\n"))
    assert crlf.findings == []
    mixed = await run(HygieneAnalyzer(), under_review("w.txt", "x\ny\n", "x\ny\r\nz\n"))
    assert rules_at(mixed.findings) == {("hygiene/trailing-whitespace", 2)}


async def test_binary_and_large_files() -> None:
    def unpatched(path: str, found: FileContent | None, additions: int = 0) -> FileUnderReview:
        return FileUnderReview(ChangedFile(path, "added", None, additions, 0), PatchLines(), found)

    output = await run(
        HygieneAnalyzer(),
        unpatched=[
            unpatched("img/logo.png", FileContent(None, 2048, is_binary=True)),
            unpatched("pkg/__init__.py", FileContent("", 0)),  # empty, not binary
            unpatched("data/big.csv", None, additions=6000),
            unpatched("data/blob.bin", FileContent(None, 5_000_000, is_binary=True)),
        ],
        settings=ReviewSettings(max_file_bytes=1_000_000),
    )
    assert (
        rules_at(output.findings)
        == {
            ("hygiene/binary-file", 1),
            ("hygiene/large-file", 1),
        }
        and len(output.findings) == 4
    )
    by_path = {(f.path, f.rule): f.message for f in output.findings}
    assert by_path[("img/logo.png", "hygiene/binary-file")] == "binary file added (2,048 bytes)"
    assert by_path[("data/big.csv", "hygiene/large-file")] == "large change: 6,000 lines added"
    assert "5,000,000 bytes" in by_path[("data/blob.bin", "hygiene/large-file")]
    assert all(not f.inline for f in output.findings)


def test_hygiene_asks_only_for_possibly_binary_added_files() -> None:
    wanted = HygieneAnalyzer().wanted_paths(
        [ChangedFile("a.py", "modified", "@@ -1 +1 @@\n-a\n+b", 1, 1)],
        [
            ChangedFile("logo.png", "added", None, 0, 0),
            ChangedFile("big.csv", "added", None, 9000, 0),
            ChangedFile("old.png", "modified", None, 0, 0),
        ],
    )
    assert wanted == ["logo.png"]


def test_fingerprints_ignore_surrounding_whitespace() -> None:
    assert fingerprint("r", "p", "  x = 1  ") == fingerprint("r", "p", "x = 1")
    assert fingerprint("r", "p", "x = 1") != fingerprint("r", "q", "x = 1")
    assert len(fingerprint("r", "p", "x")) == 16


async def test_the_noqa_check_uses_the_configuration_the_first_run_could_use() -> None:
    """A setting this ruff no longer knows is dropped for the run with ``noqa`` ignored too: the
    pull request's own ``# noqa`` is judged, not left as a check that could not run."""
    config = content('show-source = true\n[lint]\nselect = ["F"]\n')
    output = await run(
        PythonAnalyzer(),
        under_review("m.py", None, "x = undefined_name  # noqa\n", read=True),
        extra={"ruff.toml": config},
    )
    [found] = output.findings
    assert (found.rule, found.line) == ("python/F821", 1)
    assert found.message.startswith("Suppressed by this pull request (`# noqa` (line 1)), yet a blocker")
    assert not output.incomplete
    assert sum("no longer knows the setting" in note for note in output.notes) == 1  # said once
