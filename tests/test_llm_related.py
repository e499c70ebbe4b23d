"""What the model is shown beside a changed function (``llm/related.py``): the definitions the
changed lines call and the call sites of changed public functions, table-driven; then a
cross-file defect (a wrong keyword to a function defined in a file the pull request does not
touch) reaching the fake model and found by it, through a real local git range."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import os
import re
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from app.review.core.diff import PatchLines, parse_patch
from app.review.engine.builtin import BuiltinReviewer
from app.review.isolation.limits import Limits
from app.review.isolation.pool import ProcessPool
from app.review.llm import LlmReviewer, build_reviewer, related
from app.review.llm.bounded import ContextJob, Reviewed, file_stage, unparsable
from app.review.llm.related import Index, imported_modules, parse, related_context, wanted_paths
from app.review.measure.local import context_from_git
from app.sandbox import Call
from tests.fake_llm import Asked, FakeModelServer, Reply, answer, proposed
from tests.harness import REPO, BotHarness, review_checks_completed
from tests.llm_context_jobs import HoldContext, InProcess, StuckOnce
from tests.test_llm_engine import settings
from tests.test_llm_review import llm_env, reviews_posted

NET = '''\
"""Networking."""


def send(url, *, timeout=10, retries=3):
    """Send a request to url.

    Raises TimeoutError after timeout seconds.
    """
    return url


class Session:
    def __init__(self, base, *, verify=True):
        self.base = base

    def get(self, path):
        """GET a path below the base."""
        return path
'''

APP = """\
from pkg.net import Session, send
from . import net


def fetch(url):
    return send(url, timeout_s=5)


def other(url):
    session = Session(url)
    return net.send(url)
"""

CALLER = """\
from pkg.app import fetch


def main():
    return fetch("x")
"""

FILES = frozenset({"pkg/__init__.py", "pkg/net.py", "pkg/app.py", "pkg/cli.py", "README.md"})


def index_of(texts: dict[str, str] | None = None) -> Index:
    index = Index()
    for path, text in (texts or {"pkg/app.py": APP, "pkg/net.py": NET, "pkg/cli.py": CALLER}).items():
        index.add(path, text)
    return index


def test_imported_modules() -> None:
    assert imported_modules(
        "pkg/sub/app.py",
        parse("import os.path\nimport a.b as c\nfrom .. import net\nfrom .x import y as z\n"),
    ) == {
        "os": ("os", None),
        "c": ("a.b", None),
        "net": ("pkg", "net"),
        "z": ("pkg.sub.x", "y"),
    }


def test_the_files_to_read_are_imported_modules_then_siblings() -> None:
    imports = {"pkg/app.py": imported_modules("pkg/app.py", parse(APP))}
    assert wanted_paths(imports, FILES) == ["pkg/net.py", "pkg/__init__.py", "pkg/cli.py"]


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        # line 6 calls send: its signature and docstring; fetch changed: its call site in cli.py
        (
            {6},
            [
                "- pkg/net.py:4 (called on line 6): def send(url, *, timeout=10, retries=3)",
                "    Send a request to url.",
                "",
                "    Raises TimeoutError after timeout seconds.",
                '- pkg/cli.py:5 calls fetch: return fetch("x")',
            ],
        ),
        # line 10 builds a Session (its __init__), line 11 calls net.send
        (
            {10, 11},
            [
                "- pkg/net.py:12 (called on line 10): class Session: __init__(self, base, *, verify=True)",
                "- pkg/net.py:4 (called on line 11): def send(url, *, timeout=10, retries=3)",
                "    Send a request to url.",
                "",
                "    Raises TimeoutError after timeout seconds.",
            ],
        ),
        ({1}, []),  # an import line calls nothing
    ],
)
def test_related_context(changed: set[int], expected: list[str]) -> None:
    found = related_context("pkg/app.py", changed, index_of(), FILES, budget_chars=10_000)
    assert list(found.lines) == expected
    assert found.cut == 0


def test_the_budget_cuts_the_lowest_ranked_and_counts_them() -> None:
    found = related_context("pkg/app.py", {6}, index_of(), FILES, budget_chars=160)  # 150 + 46 needed
    assert found.lines[0].startswith("- pkg/net.py:4")
    assert not any("cli.py" in line for line in found.lines)
    assert found.cut == 1
    assert ("pkg/net.py", 4) in found.shown


def spot_the_wrong_keyword(asked: Asked) -> Reply:
    """A model that flags a call with a keyword the called function's signature (shown to it)
    does not take."""
    signatures = dict(re.findall(r"def (\w+)\(([^)]*)\)", asked.user))
    findings = []
    for path, lines in asked.files().items():
        for number, text in lines:
            call = re.search(r"(\w+)\(\w+, (\w+)=", text)
            if call and call.group(1) in signatures and f"{call.group(2)}=" not in signatures[call.group(1)]:
                findings.append(
                    proposed(path, number, message=f"`{call.group(1)}` takes no `{call.group(2)}`")
                )
    return answer(asked, findings)


@pytest.fixture
async def model() -> AsyncIterator[FakeModelServer]:
    server = await FakeModelServer(spot_the_wrong_keyword).start()
    yield server
    await server.stop()


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def wrong_keyword_repo(tmp_path: Path, extra: dict[str, str] | None = None) -> Path:
    """A local git range whose head passes a keyword ``send`` (in a file it does not touch) does
    not take; ``extra``: more files the head adds."""
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Dev")
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "net.py").write_text(NET)
    (repo / "pkg" / "app.py").write_text(APP.replace("timeout_s=5", "timeout=5"))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / "pkg" / "app.py").write_text(APP)
    for path, text in (extra or {}).items():
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "wrong keyword")
    return repo


SEND = "- pkg/net.py:4 (called on line 6): def send(url, *, timeout=10, retries=3)"
SEND_NEW = SEND.replace("line 6", "line 6, 11")  # where every line of pkg/app.py is new


async def test_a_wrong_keyword_to_a_function_in_another_file_is_visible(
    model: FakeModelServer, tmp_path: Path
) -> None:
    repo = wrong_keyword_repo(tmp_path)
    reviewer = build_reviewer(settings(model))
    try:
        result = await reviewer.review(await context_from_git(repo, "HEAD~1", "HEAD"))
    finally:
        await reviewer.aclose()
    [asked] = model.reviews()
    assert SEND in asked.user
    # What eval --history reads as "in the prompt": the hunk, the enclosing function, the callee.
    assert {("pkg/app.py", 6), ("pkg/app.py", 5), ("pkg/net.py", 4)} <= result.prompt_lines
    assert ("pkg/net.py", 9) not in result.prompt_lines  # send's body was not shown
    assert [(f.path, f.line, f.message) for f in result.findings if f.rule.startswith("llm/")] == [
        ("pkg/app.py", 6, "`send` takes no `timeout_s` (confidence 80%)")
    ]


# --- inside the execution boundary (issue 27) -------------------------------------------------
# Parsing what a pull request carries happens in an analysis child, one index per review; a file
# that does not parse, nests too deeply or trips a limit loses its related context, never the
# review; and the serving process parses none of it.

HOSTILE = "".join(f"def a{i}(): a{i + 1}()\n" for i in range(4000))  # 80 KB: 4,000 callees
DEEP = "X = " + "+".join(["1"] * 5000) + "\n"  # ast.parse: RecursionError
DEEP_DEFAULT = "def send(url, *, timeout=" + "+".join(["1"] * 1500) + "):\n    return url\n"  # unparse


def added(text: str) -> PatchLines:
    count = len(text.splitlines())
    return parse_patch(f"@@ -0,0 +1,{count} @@\n" + "".join(f"+{line}\n" for line in text.splitlines()))


def failed(path: str, why: str) -> str:
    return (
        f"parsing `{path}` for the model's related context failed: {why}; "
        "the model reviewed the change without it"
    )


@pytest.mark.parametrize(
    ("texts", "notes", "with_context"),
    [
        # a changed file that does not parse: named; the other keeps its context
        (
            {"pkg/bad.py": "def f(:\n"},
            [failed("pkg/bad.py", "it does not parse as Python (line 1)")],
            {"pkg/app.py"},
        ),
        (
            {"pkg/bad.py": DEEP},
            [failed("pkg/bad.py", "it nests too deeply (RecursionError)")],
            {"pkg/app.py"},
        ),
        # what pkg/app.py calls cannot be shown (its signature nests too deeply): app.py loses it
        ({"pkg/net.py": DEEP_DEFAULT}, [failed("pkg/app.py", "it nests too deeply (RecursionError)")], set()),
        # a file read beside them that does not parse is only not a source: no note
        ({"pkg/cli.py": DEEP}, [], {"pkg/app.py"}),
    ],
)
async def test_a_file_that_cannot_be_parsed_loses_only_its_own_context(
    texts: dict[str, str], notes: list[str], with_context: set[str]
) -> None:
    texts = {"pkg/app.py": APP, "pkg/net.py": NET, "pkg/cli.py": CALLER, **texts}
    reviewed = [p for p in ("pkg/app.py", "pkg/bad.py") if p in texts]
    job = ContextJob(tuple(Reviewed(p, added(texts[p])) for p in reviewed), texts, FILES, budget_chars=10_000)
    found = await job.run()
    assert list(found.notes) == notes
    assert {f.path for f in found.files} == with_context
    for context in found.files:
        assert SEND_NEW in context.related.lines


@pytest.mark.parametrize(
    ("error", "why"),
    [
        (RecursionError(), "it nests too deeply (RecursionError)"),
        (SyntaxError("invalid syntax", ("m.py", 3, 1, "x")), "it does not parse as Python (line 3)"),
        (SyntaxError("source code string cannot contain null bytes"), "it does not parse as Python"),
        (ValueError("source code string cannot contain null bytes"), "it is not Python source text"),  # 3.11
    ],
)
def test_why_a_file_was_not_parsed(error: Exception, why: str) -> None:
    assert unparsable("m.py", error) == failed("m.py", why)


async def test_one_definition_index_per_review(
    model: FakeModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each file's definitions are indexed once, however many callees the changed lines have
    (before: once per callee, quadratic in the file)."""
    indexed: list[int] = []
    definitions = related._definitions

    def counted(tree: ast.Module) -> dict[str, Any]:
        indexed.append(len(tree.body))
        return definitions(tree)

    monkeypatch.setattr(related, "_definitions", counted)
    repo = wrong_keyword_repo(tmp_path, {"pkg/many.py": HOSTILE[: HOSTILE.index("def a300(")]})
    reviewer = LlmReviewer(
        build_reviewer(settings(model)).provider, builtin=BuiltinReviewer([], boundary=InProcess())
    )
    try:
        await reviewer.review(await context_from_git(repo, "HEAD~1", "HEAD"))
    finally:
        await reviewer.aclose()
    [asked] = model.reviews()
    assert SEND in asked.user
    # pkg/net.py (read beside them), pkg/app.py and pkg/many.py: once each (pkg/__init__.py is empty)
    assert sorted(indexed) == [3, 4, 300]


async def test_no_python_of_the_pull_request_is_parsed_in_the_serving_process(
    model: FakeModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = wrong_keyword_repo(tmp_path, {"pkg/deep.py": DEEP})
    pool = ProcessPool(Limits(workers=1))

    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise AssertionError("the serving process parsed Python")

    reviewer = LlmReviewer(build_reviewer(settings(model)).provider, builtin=BuiltinReviewer(boundary=pool))
    context = await context_from_git(repo, "HEAD~1", "HEAD")
    monkeypatch.setattr(ast, "parse", refuse)  # here only: the children are processes of their own
    try:
        result = await reviewer.review(context)
    finally:
        monkeypatch.undo()  # pytest's own reports parse
        await reviewer.aclose()
        pool.close()
    [asked] = model.reviews()
    assert SEND in asked.user  # found in a child
    assert set(asked.files()) == {"pkg/app.py", "pkg/deep.py"}
    assert failed("pkg/deep.py", "it nests too deeply (RecursionError)") in result.notes
    assert any(f.rule.startswith("llm/") for f in result.findings)


async def test_a_limit_that_trips_on_one_file_leaves_out_only_its_context(
    model: FakeModelServer, tmp_path: Path
) -> None:
    repo = wrong_keyword_repo(tmp_path, {"pkg/slow.py": "def slow():\n    return fetch(1)\n"})
    pool = ProcessPool(Limits(workers=1))
    boundary = StuckOnce(pool, file_stage("pkg/slow.py"), seconds=0.5)
    reviewer = LlmReviewer(
        build_reviewer(settings(model)).provider, builtin=BuiltinReviewer(boundary=boundary)
    )
    try:
        result = await reviewer.review(await context_from_git(repo, "HEAD~1", "HEAD"))
    finally:
        await reviewer.aclose()
        pool.close()
    assert (
        "parsing `pkg/slow.py` for the model's related context took longer than 0.5 s; "
        "the model reviewed the change without it"
    ) in result.notes
    [asked] = model.reviews()
    assert set(asked.files()) == {"pkg/app.py", "pkg/slow.py"}  # both reviewed by the model
    assert SEND in asked.user  # pkg/app.py kept its related context
    # pkg/slow.py was left out of the index: its call of the changed fetch is not shown
    assert "- pkg/slow.py:2 calls fetch" not in asked.user


BASE = {"README.md": "# widgets\n", "pkg/__init__.py": "", "pkg/net.py": NET}
CALLS_HOSTILE = "from pkg import hostile\n\n\ndef run():\n" + "".join(
    f"    hostile.a{i}()\n" for i in range(2500)
)


def completed_checks(bot: BotHarness) -> list[Call]:
    return review_checks_completed(bot.fake)


@pytest.mark.slow
@pytest.mark.e2e
async def test_serve_answers_deliveries_while_the_model_review_of_4000_functions_is_parsed(
    tmp_path: Path, model: FakeModelServer
) -> None:
    gate = tmp_path / "gate"  # the one directory of the test's the confined child sees
    gate.mkdir()
    entered, release = gate / "entered", gate / "release"
    os.mkfifo(entered)
    os.mkfifo(release)
    bot = BotHarness(tmp_path, env=llm_env(model))
    pool = ProcessPool(Limits(workers=1), readable=(gate,))
    # GitHub gives no patch for the 4,000 lines of pkg/hostile.py, but it is read beside the
    # changed files, which call 2,500 of its functions.
    head = {"pkg/hostile.py": HOSTILE, "pkg/app.py": APP, "pkg/calls.py": CALLS_HOSTILE}
    number = bot.open_pull(head, base_files=BASE, author="alice")
    await bot.start()
    assert bot.runtime is not None and isinstance(bot.runtime.reviewer, LlmReviewer)
    configured = bot.runtime.reviewer  # its provider (closed with the bot), on the held pool
    bot.runtime.reviewer = LlmReviewer(
        configured.provider,
        limits=configured.limits,
        builtin=BuiltinReviewer(boundary=HoldContext(pool, str(entered), str(release))),
    )
    try:
        await bot.fake.request_review(REPO, number, "revbot", by="alice")
        # The related context was found in the child, which holds there: the review waits on it.
        await asyncio.wait_for(asyncio.to_thread(entered.read_text), 120)
        statuses = [
            await bot.post_signed("ping", {"zen": "Keep it logically awesome.", "hook_id": n}, f"held-{n}")
            for n in range(20)
        ]
        assert all(200 <= status < 300 for status in statuses), statuses
        await asyncio.to_thread(release.write_text, "go")
        await bot.drain(within=300)
    finally:
        for gate, mode in ((release, os.O_RDWR), (entered, os.O_WRONLY)):  # nothing left waiting
            with contextlib.suppress(OSError):
                os.close(os.open(gate, mode | os.O_NONBLOCK))
        await bot.stop()
        pool.close()
    [post] = reviews_posted(bot)
    [asked] = model.reviews()
    assert set(asked.files()) == {"pkg/app.py", "pkg/calls.py"}
    assert "- pkg/hostile.py:1 (called on line 5): def a0()" in asked.user  # parsed, in the child
    assert SEND_NEW in asked.user
    assert "`send` takes no `timeout_s`" in json.dumps(post.body["comments"])
    assert completed_checks(bot)


@pytest.mark.slow
@pytest.mark.e2e
async def test_a_file_nested_too_deeply_to_parse_gets_a_model_review_with_a_note(
    tmp_path: Path, model: FakeModelServer
) -> None:
    bot = BotHarness(tmp_path, env=llm_env(model))
    number = bot.open_pull({"deep.py": DEEP, "pkg/app.py": APP}, base_files=BASE, author="alice")
    await bot.start()
    try:
        await bot.fake.request_review(REPO, number, "revbot", by="alice")
        await bot.drain(within=300)
    finally:
        await bot.stop()
    [post] = reviews_posted(bot)
    unticked = post.body["body"].replace("`", "")
    assert failed("deep.py", "it nests too deeply (RecursionError)").replace("`", "") in unticked
    [asked] = model.reviews()
    assert set(asked.files()) == {"deep.py", "pkg/app.py"}  # the model reviewed both
    assert SEND_NEW in asked.user  # pkg/app.py kept its related context
    assert "`send` takes no `timeout_s`" in json.dumps(post.body["comments"])
    [check] = completed_checks(bot)
    assert "RecursionError" in json.dumps(check.body)
