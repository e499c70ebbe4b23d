"""``python -m app eval``: the shipped corpus, the built-in reviewer's numbers (as docs/llm.md
prints them), and the harness itself with a scripted model behind the real SDK."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.offline import offline
from app.review.core.diff import parse_patch
from app.review.llm import build_reviewer
from app.review.measure.evaluate import DEFAULT_CASES, evaluate, load_cases
from app.settings.config import load_llm_settings, load_reviewer_settings
from tests.fake_llm import Asked, FakeModelServer, Reply, answer, proposed

ROOT = Path(__file__).resolve().parents[1]
REQUIRED_KINDS = {
    "logic/off-by-one",
    "logic/inverted-condition",
    "logic/wrong-variable",
    "resource-leak",
    "error-handling/swallowed",
    "mutable-default",
    "security/sql-injection",
    "security/unsafe-deserialisation",
    "concurrency/missing-await",
    "concurrency/race",
    "testing/no-assertion",
    "clean",
}


def defect_lines(cases_dir: Path) -> set[tuple[str, str]]:
    """(path, text) of every line the corpus says a good reviewer must flag."""
    wanted: set[tuple[str, str]] = set()
    for case in load_cases(cases_dir):
        sections = re.split(
            r"^diff --git a/\S+ b/(\S+)\n", (case.directory / "change.patch").read_text(), flags=re.M
        )
        patches = dict(zip(sections[1::2], sections[2::2], strict=True))
        for defect in case.defects:
            added = parse_patch(patches[defect.path]).added_text
            wanted |= {
                (defect.path, added[n].strip()) for n in range(defect.first, defect.last + 1) if n in added
            }
    return wanted


def scripted_model(wanted: set[tuple[str, str]]) -> object:
    def script(asked: Asked) -> Reply:
        findings = [
            proposed(path, number, confidence=0.7, message="A scripted finding.")
            for path, lines in asked.files().items()
            for number, text in lines
            if (path, text.strip()) in wanted
        ]
        return answer(asked, findings)

    return script


@pytest.fixture
async def model() -> AsyncIterator[FakeModelServer]:
    server = await FakeModelServer().start()
    yield server
    await server.stop()


def test_the_shipped_corpus_covers_the_defect_kinds_and_clean_refactors() -> None:
    cases = load_cases(DEFAULT_CASES)
    assert len(cases) >= 30
    assert {c.kind for c in cases} == REQUIRED_KINDS
    assert sum(1 for c in cases if c.clean) >= 5
    assert all((c.directory / "base").is_dir() and (c.directory / "change.patch").is_file() for c in cases)


async def run_eval(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app",
        "eval",
        *args,
        cwd=ROOT,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "REVIEWER"))},
            **(env or {}),
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.mark.slow
async def test_the_builtin_reviewer_through_eval_prints_the_documented_numbers() -> None:
    code, out, err = await run_eval("--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["reviewer"] == "builtin" and len(report["cases"]) >= 30
    assert report["tokens"] == 0 and report["false_blockers"] == 0
    summary = (
        f"recall: {report['found']}/{report['expected']} defects ({report['recall']:.0%}); "
        f"false blockers: {report['false_blockers']} of {report['clean_cases']} clean cases"
    )
    assert summary in (ROOT / "docs/llm.md").read_text(), "docs/llm.md prints the built-in reviewer's numbers"


@pytest.mark.slow
async def test_the_llm_reviewer_through_eval_with_a_scripted_model(model: FakeModelServer) -> None:
    model.script = scripted_model(defect_lines(DEFAULT_CASES))  # type: ignore[assignment]
    env = {"REVIEWER": "llm", "LLM_BASE_URL": model.openai_url, "LLM_MODEL": "scripted", "LLM_API_KEY": "k"}
    code, out, err = await run_eval("--format", "text", env=env)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("reviewer: llm (openai scripted) (35 cases, 7 clean)")
    assert re.search(
        r"^recall: 28/28 defects \(100%\); false blockers: 0 of 7 clean cases; tokens: [1-9]\d*;", out, re.M
    )
    assert len(model.reviews()) == len(load_cases(DEFAULT_CASES))
    row = next(line for line in lines if line.startswith("off-by-one-range "))
    assert re.search(r"\s1/1\s+0\s+[1-9]\d*\s+\d+\.\d\d$", row)


@pytest.mark.slow
async def test_eval_without_a_model_configured_exits_2_naming_the_setting() -> None:
    code, out, err = await run_eval("--reviewer", "llm")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "revbot: configuration error: LLM_MODEL: is required with REVIEWER=llm (the provider's model name)"
    ]


@pytest.mark.slow
async def test_the_harness_counts_recall_false_blockers_and_tokens(
    tmp_path: Path, model: FakeModelServer
) -> None:
    cases = tmp_path / "cases"
    for name in ("found", "missed", "clean-with-secret"):
        (cases / name / "base").mkdir(parents=True)
        (cases / name / "base" / "m.py").write_text("A = 1\n")
    (cases / "found" / "change.patch").write_text(
        "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1,2 @@\n A = 1\n+B = A - 1\n"
    )
    (cases / "missed" / "change.patch").write_text(
        "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1,2 @@\n A = 1\n+C = A + 1\n"
    )
    (cases / "clean-with-secret" / "change.patch").write_text(
        "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1,2 @@\n A = 1\n"
        '+API_TOKEN = "Zq8xW3vR7tY2uK9mN4bP6sL1"\n'
    )
    defect = "description: d\nkind: logic/off-by-one\ndefects:\n  - path: m.py\n    lines: [2, 2]\n"
    (cases / "found" / "case.yaml").write_text(defect)
    (cases / "missed" / "case.yaml").write_text(defect)
    (cases / "clean-with-secret" / "case.yaml").write_text("description: c\nkind: clean\n")
    model.script = scripted_model({("m.py", "B = A - 1")})  # type: ignore[assignment]
    settings = load_llm_settings(
        {"LLM_BASE_URL": model.openai_url, "LLM_MODEL": "scripted", "LLM_API_KEY": "k"}
    )
    reviewer = build_reviewer(settings)
    async with offline(load_reviewer_settings({}), reviewer=reviewer) as bot:  # closes the reviewer
        report = await evaluate(load_cases(cases), reviewer, label="llm", review=bot.review_range)
    by_name = {c.name: c for c in report.cases}
    assert (by_name["found"].found, by_name["missed"].found) == (1, 0)
    assert (report.found, report.expected, report.false_blockers, report.clean_cases) == (1, 2, 1, 1)
    assert report.tokens == sum(c.tokens for c in report.cases) > 0
    assert all(c.tokens > 0 and c.error is None for c in report.cases)
    assert "recall: 1/2 defects (50%); false blockers: 1 of 1 clean cases" in report.as_text()
