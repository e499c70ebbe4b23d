"""The field's linters as analyzers (issue 30): zizmor on workflows, shellcheck on shell scripts,
hadolint on Dockerfiles. Their decisions (which files, which severity, which configuration) are
pure tables; each tool then runs for real on small files (slow: a subprocess each), and a
hostile pull request per configuration ends at its limit with the note (``review --git``)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.ops.doctor import check_linters
from app.review.analyzers import LINTERS, AnalyzerOutput, FileUnderReview
from app.review.analyzers.dockerfile import DockerfileAnalyzer, posix_shell
from app.review.analyzers.external import MAX_INPUT_BYTES
from app.review.analyzers.shell import ShellAnalyzer
from app.review.analyzers.workflows import INVALID_RULE, WorkflowAnalyzer, pr_code_checkouts, zizmor_severity
from app.review.core.diff import parse_patch
from app.review.core.model import Severity
from app.review.core.toolconfig import (
    hadolint_config,
    is_dockerfile,
    is_shell_candidate,
    is_workflow,
    looks_like_shell,
    shellcheck_configs,
    tool_config_paths,
    zizmor_config,
)
from tests.test_isolation import alias_bomb, committed, review_last_commit
from tests.test_review_analyzers import changed, content, run

PWN = """\
name: pwn
on:
  pull_request_target:
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2
        with:
          ref: ${{ github.event.pull_request.head.sha }}
          persist-credentials: false
      - run: make test
"""
TITLE_INJECTION = """\
name: greet
on: pull_request
permissions: {}
jobs:
  greet:
    runs-on: ubuntu-latest
    steps:
      - run: echo "${{ github.event.pull_request.title }}"
"""
THIRD_PARTY = """\
name: lint
on: push
permissions: {}
jobs:
  lint:
    runs-on: ubuntu-latest
    steps:
      - uses: someone/lint-action@main
"""
CLEAN = """\
name: ci
on:
  push:
  pull_request:
permissions:
  contents: read
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2
        with:
          persist-credentials: false
      - run: make test
"""
SAFE_TARGET = """\
name: label
on: pull_request_target
permissions:
  pull-requests: write
jobs:
  label:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2
        with:
          persist-credentials: false
      - run: ./label.sh
"""
COMPOSITE = """\
name: hello
description: says hello
runs:
  using: composite
  steps:
    - run: echo "${{ github.event.issue.title }}"
      shell: bash
"""

# As pypa/cibuildwheel's action.yml has it: zizmor is highly confident, yet the value is the
# calling workflow's, not a stranger's.
ACTION_INPUTS = """\
name: build
description: builds
inputs:
  only:
    description: the one identifier to build
runs:
  using: composite
  steps:
    - run: |
        cibw \\
          ${{ inputs.only != '' && format('--only "{0}"', inputs.only) || ''}} \\
          2>&1
      shell: bash
"""


# --- which files, pure -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "workflow", "dockerfile", "shell"),
    [
        (".github/workflows/ci.yml", True, False, False),
        (".github/workflows/ci.yaml", True, False, False),
        (".github/workflows/sub/ci.yml", False, False, False),  # GitHub reads only the directory itself
        ("actions/setup/action.yml", True, False, False),
        ("action.yaml", True, False, False),
        ("docs/ci.yml", False, False, False),
        ("Dockerfile", False, True, False),
        ("docker/Dockerfile.dev", False, True, False),
        ("build.dockerfile", False, True, False),
        ("scripts/release.sh", False, False, True),
        ("lib.bash", False, False, True),
        ("bin/tool", False, False, True),  # maybe: its shebang decides
        ("Makefile", False, False, False),
        ("README.md", False, False, False),
    ],
)
def test_which_files_each_linter_reviews(path: str, workflow: bool, dockerfile: bool, shell: bool) -> None:
    assert (is_workflow(path), is_dockerfile(path), is_shell_candidate(path)) == (workflow, dockerfile, shell)


@pytest.mark.parametrize(
    ("path", "text", "expected"),
    [
        ("bin/tool", "#!/bin/sh\necho hi\n", True),
        ("bin/tool", "#!/usr/bin/env bash\necho hi\n", True),
        ("bin/tool", "#!/usr/bin/env -S bash -e\necho hi\n", True),
        ("bin/tool", "#!/usr/bin/env python3\nprint()\n", False),
        ("bin/tool", "just some notes\n", False),
        ("run.sh", "echo no shebang\n", True),
    ],
)
def test_a_file_without_a_suffix_is_shell_when_its_shebang_says(path: str, text: str, expected: bool) -> None:
    assert looks_like_shell(path, text) is expected


def test_the_linters_configurations_are_read_with_the_lint_configuration() -> None:
    wanted = tool_config_paths([".github/workflows/ci.yml", "docker/Dockerfile", "scripts/ci/run.sh"])
    assert set(wanted) == {
        "zizmor.yml",
        "zizmor.yaml",
        ".github/zizmor.yml",
        ".github/zizmor.yaml",
        ".hadolint.yaml",
        ".hadolint.yml",
        ".shellcheckrc",
        "scripts/.shellcheckrc",
        "scripts/ci/.shellcheckrc",
    }
    from app.review.core.lintconfig import config_paths

    assert set(wanted) <= set(
        config_paths([".github/workflows/ci.yml", "docker/Dockerfile", "scripts/ci/run.sh"], None)
    )


# --- severities and the pwn request, pure ----------------------------------------------------


@pytest.mark.parametrize(
    ("ident", "confidence", "severity", "feature", "expected"),
    [
        (
            "template-injection",
            "High",
            "High",
            'echo "${{ github.event.pull_request.title }}"',
            Severity.BLOCKER,
        ),
        ("template-injection", "High", "High", "git switch ${{ github.head_ref }}", Severity.BLOCKER),
        # A composite action's inputs come from the workflow that calls it: not a stranger's text.
        ("template-injection", "High", "High", '"${{ inputs.package-dir }}" \\', Severity.CONCERN),
        ("template-injection", "Medium", "High", "${{ inputs.name }}", Severity.CONCERN),
        ("template-injection", "Low", "Informational", "${{ env.X }}", Severity.NIT),
        ("dangerous-triggers", "Medium", "High", "pull_request_target", Severity.CONCERN),
        ("unpinned-uses", "High", "High", "someone/action@main", Severity.CONCERN),
        ("unpinned-uses", "High", "High", "actions/checkout@v4", Severity.NIT),
        ("artipacked", "Low", "Medium", "actions/checkout@v4", Severity.NIT),  # zizmor doubts it
        ("artipacked", "Medium", "Medium", "actions/checkout@v4", Severity.CONCERN),
        ("excessive-permissions", "Medium", "Low", "permissions: write-all", Severity.NIT),
    ],
)
def test_zizmor_determinations_map_to_severities(
    ident: str, confidence: str, severity: str, feature: str, expected: Severity
) -> None:
    assert zizmor_severity(ident, confidence, severity, feature, feature) is expected


@pytest.mark.parametrize(
    ("workflow", "jobs"),
    [
        (PWN, ["build"]),
        (PWN.replace("pull_request_target", "workflow_run"), ["build"]),
        (PWN.replace("pull_request_target:", "pull_request:"), []),  # a fork's PR gets no secrets
        (SAFE_TARGET, []),  # the base is checked out: its own code runs
        (PWN.replace("      - run: make test\n", ""), []),  # checked out, nothing of it runs
        (PWN.replace("run: make test", "uses: ./.github/actions/build"), ["build"]),
        (PWN.replace("github.event.pull_request.head.sha", "github.head_ref"), ["build"]),
    ],
)
def test_a_pwn_request_is_a_dangerous_trigger_a_pr_checkout_and_a_run(workflow: str, jobs: list[str]) -> None:
    assert [c.job for c in pr_code_checkouts(yaml.safe_load(workflow))] == jobs


# --- configurations, pure --------------------------------------------------------------------


def test_a_shellcheckrc_keeps_its_rules_and_never_reaches_outside_the_tree() -> None:
    rc = "# ours\ndisable=SC2086\nsource-path=/etc\nsource-path=SCRIPTDIR\nsource-path=../..\n"
    rc += "external-sources=true\nshell=bash\n"
    config = shellcheck_configs({"scripts/.shellcheckrc": content(rc)})
    assert config.files == {
        "scripts/.shellcheckrc": "disable=SC2086\nsource-path=SCRIPTDIR\nshell=bash\n",
        ".shellcheckrc": "",  # the search for one ends inside the tree
    }
    assert config.used == ("scripts/.shellcheckrc",)
    outside = "names a path outside the repository; it was dropped"
    assert config.notes == (
        f"`scripts/.shellcheckrc`: the `source-path` `/etc` {outside}",
        f"`scripts/.shellcheckrc`: the `source-path` `../..` {outside}",
        "`scripts/.shellcheckrc`: `external-sources` was dropped "
        "(files outside the pull request are not read)",
    )


def test_a_zizmor_config_keeps_its_rules_and_refuses_an_alias_bomb() -> None:
    text = "rules:\n  unpinned-uses:\n    config:\n      policies:\n        '*': ref-pin\n  artipacked:\n"
    text += "    ignore: [ci.yml:12]\nother: /etc/passwd\n"
    config = zizmor_config({".github/zizmor.yml": content(text)})
    assert yaml.safe_load(config.files[".github/zizmor.yml"]) == {
        "rules": {
            "unpinned-uses": {"config": {"policies": {"*": "ref-pin"}}},
            "artipacked": {"ignore": ["ci.yml:12"]},
        }
    }
    bombed = zizmor_config({"zizmor.yml": content(alias_bomb())})
    assert bombed.files == {} and bombed.used == ()
    assert bombed.notes == (
        "`zizmor.yml` was not read (its aliases expand to more than 100,000 nodes); "
        "the linter's defaults were used",
    )
    assert zizmor_config({}).files == {}


@pytest.mark.parametrize(
    ("text", "shell"),
    [
        ("FROM debian\nRUN echo hi\n", True),
        ('FROM x\nSHELL ["/bin/bash", "-o", "pipefail", "-c"]\n', True),
        ('FROM x\nSHELL ["powershell", "-Command"]\n', False),
        ('FROM x\nshell ["cmd.exe", "/S", "/C"]\n', False),
    ],
)
def test_shellcheck_rules_apply_to_dockerfiles_whose_run_is_shell(text: str, shell: bool) -> None:
    assert posix_shell(text) is shell


def test_a_hadolint_config_keeps_its_rules_and_ours_is_always_there() -> None:
    text = "ignored: [DL3008]\ntrustedRegistries: [docker.io]\nfailure-threshold: none\nformat: sarif\n"
    config = hadolint_config({".hadolint.yaml": content(text)})
    assert yaml.safe_load(config.files[".hadolint.yaml"]) == {
        "ignored": ["DL3008"],
        "trustedRegistries": ["docker.io"],
    }
    assert hadolint_config({}).files == {".hadolint.yaml": "{}\n"}


# --- the tools, for real ---------------------------------------------------------------------


def reviewed(path: str, new: str, old: str | None = None) -> FileUnderReview:
    file = changed(path, old, new)
    return FileUnderReview(file, parse_patch(file.patch), content(new))


def found(output: AnalyzerOutput) -> set[tuple[str, int, Severity]]:
    return {(f.rule, f.line, f.severity) for f in output.findings}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "text", "expected"),
    [
        (
            ".github/workflows/pwn.yml",
            PWN,
            {
                ("workflow/dangerous-triggers", 3, Severity.BLOCKER),
                ("workflow/excessive-permissions", 5, Severity.CONCERN),
            },
        ),
        (
            ".github/workflows/greet.yml",
            TITLE_INJECTION,
            {("workflow/template-injection", 8, Severity.BLOCKER)},
        ),
        (".github/workflows/lint.yml", THIRD_PARTY, {("workflow/unpinned-uses", 8, Severity.CONCERN)}),
        (".github/workflows/ci.yml", CLEAN, set()),
        (
            ".github/actions/hello/action.yml",
            COMPOSITE,
            {("workflow/template-injection", 6, Severity.BLOCKER)},
        ),
        ("action.yml", ACTION_INPUTS, {("workflow/template-injection", 11, Severity.CONCERN)}),
    ],
)
async def test_zizmor_on_workflows(path: str, text: str, expected: set[tuple[str, int, Severity]]) -> None:
    output = await run(WorkflowAnalyzer(), reviewed(path, text))
    assert found(output) == expected
    assert not output.incomplete
    assert output.notes == ["workflows checked by zizmor (offline)"]
    for f in output.findings:
        assert f.docs.startswith("https://docs.zizmor.sh/audits/#") and "https://" not in f.message


@pytest.mark.slow
async def test_the_repositorys_zizmor_config_is_honoured() -> None:
    config = "rules:\n  unpinned-uses:\n    disable: true\n"
    output = await run(
        WorkflowAnalyzer(),
        reviewed(".github/workflows/lint.yml", THIRD_PARTY),
        configs={"zizmor.yml": content(config)},
    )
    assert found(output) == set()
    assert output.notes == ["workflows checked by zizmor (offline) with the repository's `zizmor.yml`"]


@pytest.mark.parametrize(
    ("old", "new", "blocked"),
    [
        (None, "name: x\non: push\njobs: [\n", True),  # a new workflow that is not YAML
        (CLEAN, CLEAN.replace("  test:\n", "  test:\n   bad: [\n"), True),  # it parsed before
        ("jobs: [\n", "jobs: [\n# more\n", False),  # it never parsed: not this change's doing
    ],
)
async def test_a_workflow_that_no_longer_parses_is_a_blocker(
    old: str | None, new: str, blocked: bool
) -> None:
    output = await run(
        WorkflowAnalyzer(command=["/nonexistent/zizmor"]), reviewed(".github/workflows/x.yml", new, old)
    )
    assert {f.rule for f in output.findings} == ({INVALID_RULE} if blocked else set())
    assert all(f.severity is Severity.BLOCKER for f in output.findings)


async def test_a_workflow_alias_bomb_is_not_handed_to_zizmor() -> None:
    output = await run(
        WorkflowAnalyzer(command=["/nonexistent/zizmor"]), reviewed(".github/workflows/b.yml", alias_bomb())
    )
    assert output.findings == [] and output.incomplete
    assert output.notes == [
        "`.github/workflows/b.yml` was not checked (its aliases expand to more than 100,000 nodes)"
    ]


@pytest.mark.slow
async def test_shellcheck_on_scripts_with_the_repositorys_rc() -> None:
    script = reviewed("scripts/run.sh", '#!/bin/bash\nrm -rf $TARGET/build\necho "$1"\n')
    shebang = reviewed("bin/tool", "#!/bin/sh\ncd $HOME\n")
    prose = reviewed("NOTES", "not a script $x\n")
    output = await run(ShellAnalyzer(), script, shebang, prose)
    assert {(f.path, f.rule, f.line, f.severity) for f in output.findings} == {
        ("scripts/run.sh", "shell/SC2086", 2, Severity.NIT),
        ("bin/tool", "shell/SC2086", 2, Severity.NIT),
        ("bin/tool", "shell/SC2164", 2, Severity.CONCERN),
    }
    assert all(f.docs.startswith("https://www.shellcheck.net/wiki/SC") for f in output.findings)
    quiet = await run(ShellAnalyzer(), script, configs={".shellcheckrc": content("disable=SC2086\n")})
    assert quiet.findings == []
    assert quiet.notes == ["shell scripts checked by shellcheck with the repository's `.shellcheckrc`"]


@pytest.mark.slow
async def test_shellcheck_never_follows_a_source_outside_the_tree(tmp_path: Path) -> None:
    outside = tmp_path / "outside.sh"
    outside.write_text("defined_outside=1\n")
    script = reviewed(
        "run.sh", f'#!/bin/bash\n# shellcheck source={outside}\n. {outside}\necho "$defined_outside"\n'
    )
    rc = f"external-sources=true\nsource-path={tmp_path}\n"
    output = await run(ShellAnalyzer(), script, configs={".shellcheckrc": content(rc)})
    # Had shellcheck read the file, it would know the variable is assigned.
    assert ("shell/SC2154", 4, Severity.CONCERN) in found(output)
    assert (
        "`.shellcheckrc`: `external-sources` was dropped (files outside the pull request are not read)"
        in output.notes
    )


@pytest.mark.slow
async def test_hadolint_on_dockerfiles_with_the_repositorys_config() -> None:
    dockerfile = reviewed("Dockerfile", "FROM python:latest\nRUN cd /app && make $TARGET\n")
    output = await run(DockerfileAnalyzer(), dockerfile)
    assert {(f.rule, f.line, f.severity) for f in output.findings} == {
        ("dockerfile/DL3007", 1, Severity.CONCERN),
        ("dockerfile/DL3003", 2, Severity.NIT),  # WORKDIR over cd: a choice
        ("dockerfile/SC2086", 2, Severity.NIT),
    }
    windows = "FROM mcr.microsoft.com/windows/servercore:ltsc2022\n"
    # An ENV after SHELL makes hadolint forget it is PowerShell (as in docker-library/python).
    windows += 'SHELL ["powershell", "-Command"]\nENV V 3.13\n'
    windows += "RUN $url = ('x' -f ($env:V -replace 'a', '')); echo $url\n"
    on_windows = await run(DockerfileAnalyzer(), reviewed("windows/Dockerfile", windows))
    assert not [f for f in on_windows.findings if f.rule.startswith("dockerfile/SC")]
    [latest] = [f for f in output.findings if f.rule == "dockerfile/DL3007"]
    assert latest.docs == "https://github.com/hadolint/hadolint/wiki/DL3007"
    clean = await run(DockerfileAnalyzer(), reviewed("Dockerfile", "FROM python:3.12-slim\nWORKDIR /app\n"))
    assert clean.findings == []
    ignored = await run(
        DockerfileAnalyzer(), dockerfile, configs={".hadolint.yaml": content("ignored: [DL3007]\n")}
    )
    assert "dockerfile/DL3007" not in {f.rule for f in ignored.findings}
    assert ignored.notes == ["Dockerfiles checked by hadolint with the repository's `.hadolint.yaml`"]


async def test_a_script_over_the_size_limit_is_skipped_with_the_reason() -> None:
    big = reviewed("big.sh", "#!/bin/sh\n" + "echo $x\n" * (MAX_INPUT_BYTES // 8 + 1))
    output = await run(ShellAnalyzer(command=["/nonexistent/shellcheck"]), big)
    assert output.findings == [] and output.incomplete
    assert [s.reason for s in output.skipped] == [
        "shellcheck not run: larger than 1 MB, the limit for shellcheck"
    ]


@pytest.mark.parametrize("analyzer", [WorkflowAnalyzer, ShellAnalyzer, DockerfileAnalyzer])
async def test_a_missing_linter_is_a_line_in_the_summary_never_a_crash(
    analyzer: type[WorkflowAnalyzer | ShellAnalyzer | DockerfileAnalyzer],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    files = [
        reviewed(".github/workflows/ci.yml", CLEAN),
        reviewed("run.sh", "echo hi\n"),
        reviewed("Dockerfile", "FROM x\n"),
    ]
    output = await run(analyzer(), *files)
    [tool] = [t for t in LINTERS if t.program in analyzer.tools]
    assert output.incomplete and output.findings == []
    assert output.notes == [tool.missing()]
    assert len(output.skipped) == 1
    checks = check_linters()
    assert {c.level for c in checks} == {"warn"} and any(c.detail.startswith(tool.missing()) for c in checks)


async def test_a_linter_that_cannot_start_marks_its_files_unchecked() -> None:
    output = await run(ShellAnalyzer(command=["/nonexistent/shellcheck"]), reviewed("run.sh", "echo hi\n"))
    assert output.incomplete and output.findings == []
    assert output.notes == [
        "shell scripts were not checked (shellcheck could not be started (FileNotFoundError))"
    ]


def test_doctor_names_each_installed_linter() -> None:
    checks = check_linters(lambda program: [f"/opt/bin/{program}"])
    assert [(c.name, c.level) for c in checks] == [(f"linter {t.program}", "ok") for t in LINTERS]
    assert checks[0].detail == "GitHub Actions workflows checked by /opt/bin/zizmor"


# --- a hostile pull request, through review --git --------------------------------------------


def bomb_workflow() -> str:
    return alias_bomb().replace("exclude: ''\nrepos: *a9", "on: push\njobs: *a9")


OUTSIDE_RC = "external-sources=true\nsource-path=/etc\n"
# Per variant: the base (where the linters' configuration is read), the change, the notes and
# the findings the review must have.
HOSTILE: dict[str, tuple[dict[str, str], dict[str, str], list[str], set[tuple[str, str]]]] = {
    "shellcheckrc-outside": (
        {".shellcheckrc": OUTSIDE_RC},
        {"run.sh": "#!/bin/bash\n. /etc/profile\necho $HOME\n"},
        [
            "`.shellcheckrc`: the `source-path` `/etc` names a path outside the repository; it was dropped",
            "`.shellcheckrc`: `external-sources` was dropped (files outside the pull request are not read)",
        ],
        {("run.sh", "shell/SC2086")},
    ),
    "zizmor-alias-bomb": (
        {"zizmor.yml": alias_bomb()},
        {".github/workflows/greet.yml": TITLE_INJECTION},
        [
            "`zizmor.yml` was not read (its aliases expand to more than 100,000 nodes); "
            "the linter's defaults were used"
        ],
        {(".github/workflows/greet.yml", "workflow/template-injection")},
    ),
    "workflow-alias-bomb": (
        {},
        {".github/workflows/bomb.yml": bomb_workflow(), ".github/workflows/greet.yml": TITLE_INJECTION},
        ["`.github/workflows/bomb.yml` was not checked (its aliases expand to more than 100,000 nodes)"],
        {(".github/workflows/greet.yml", "workflow/template-injection")},
    ),
    # Over the analysis's memory before any linter runs: the limit's note, and no approval.
    "50-MB-script": (
        {},
        {"huge.sh": "#!/bin/sh\n" + "echo ok\n" * (50 * 1024 * 1024 // 8), "run.sh": "#!/bin/sh\necho $1\n"},
        ["the analysis needed more than 1024 MB of memory; nothing was analysed"],
        set(),
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(HOSTILE))
def test_review_git_on_a_hostile_linter_config_ends_at_its_limits_with_notes(
    tmp_path: Path, variant: str
) -> None:
    base, files, notes, expected = HOSTILE[variant]
    repo = committed(tmp_path, files, base={"README.md": "# r\n", **base})
    done = review_last_commit(repo, {**os.environ, "REVIEW_WORKERS": "1"})
    result: dict[str, Any] = json.loads(done.stdout)
    for note in notes:
        assert note in result["notes"]
    assert expected <= {(f["path"], f["rule"]) for f in result["findings"]}
    assert result["verdict"] != "APPROVE"
