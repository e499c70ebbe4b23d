"""The bot's own links work; what the pull request wrote stays inert (``inert.docs_link``).

Every rule link used to be dead: it sat in the message, and the defuser put a word joiner into
``https://`` and ``www.`` there as it must for text the pull request controls. A posted comment
is rendered as GitHub's Markdown would (CommonMark, with markdown-it-py) and both kinds followed:
the documentation is one live link to the exact address, the tool's quoted text none."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pytest
from markdown_it import MarkdownIt

from app.review.analyzers.base import FileUnderReview
from app.review.analyzers.dockerfile import rule_link
from app.review.analyzers.shell import shellcheck_link
from app.review.analyzers.workflows import DOCS as ZIZMOR_DOCS
from app.review.analyzers.workflows import SYNTAX_DOCS, WorkflowAnalyzer
from app.review.core.diff import parse_patch
from app.review.core.doclinks import postable_docs
from app.review.core.model import Finding, ReviewResult, Severity, Verdict
from app.review.engine import inert
from app.review.output import checkrun, render, report
from app.review.output.comments import comment_body
from app.review.rounds.markers import Trigger
from tests.test_review_analyzers import changed, content, run

MD = MarkdownIt("commonmark")
LIVE = re.compile(r"@[A-Za-z0-9]|[A-Za-z]://|(?i:www)\.|#\d")  # what GitHub makes live in text


@pytest.mark.parametrize(
    "url",
    [
        # what the analyzers link, as they build it
        shellcheck_link("SC2086"),
        rule_link("DL3007"),
        rule_link("SC2046"),  # hadolint's shellcheck rules link shellcheck's wiki
        ZIZMOR_DOCS,
        f"{ZIZMOR_DOCS}#template-injection",
        SYNTAX_DOCS,
        "https://docs.astral.sh/ruff/rules/undefined-name",  # ruff's own ``url``
        "https://docs.astral.sh/ruff/rules/f-string-missing-placeholders",
    ],
)
def test_the_analyzers_links_are_posted_live(url: str) -> None:
    assert postable_docs(url)
    assert inert.docs_link(url) == f" ([docs]({url}))"


@pytest.mark.parametrize(
    "url",
    [
        "",
        "http://www.shellcheck.net/wiki/SC2086",  # not https
        "HTTPS://www.shellcheck.net/wiki/SC2086",
        "//www.shellcheck.net/wiki/SC2086",
        "javascript:alert(1)",
        "javascript:alert(1)//https://docs.zizmor.sh/audits/",
        "data:text/html,https://docs.zizmor.sh/audits/",
        # look-alike hosts, and the right host with another path
        "https://docs.zizmor.sh.evil.example/audits/",
        "https://www.shellcheck.net.evil.example/wiki/SC2086",
        "https://shellcheck.net/wiki/SC2086",
        "https://www.shellcheck.net@evil.example/wiki/SC2086",
        "https://docs.zizmor.sh:443@evil.example/audits/",
        "https://evil.example/?https://docs.zizmor.sh/audits/",
        "https://github.com/hadolint/hadolint/issues/1",  # not the wiki
        "https://github.com/hadolint/hadolint/wikix/DL3007",
        "https://github.com/evil/hadolint/wiki/DL3007",
        # out of the prefix with dot segments
        "https://github.com/hadolint/hadolint/wiki/../../evil/repo",
        "https://docs.astral.sh/ruff/rules/./../../x",
        "https://docs.zizmor.sh/audits/..",
        # what could end the Markdown link, start another or hide an address
        "https://docs.zizmor.sh/audits/x)](https://evil.example",
        "https://docs.zizmor.sh/audits/x(y)",
        "https://docs.zizmor.sh/audits/<x>",
        "https://docs.zizmor.sh/audits/%2e%2e/x",  # percent escapes
        "https://docs.zizmor.sh/audits/%29",
        "https://docs.zizmor.sh/audits/a b",  # a space
        "https://docs.zizmor.sh/audits/a\tb",
        'https://docs.zizmor.sh/audits/a"onmouseover=x',
        "https://docs.zizmor.sh/audits/a'b",
        "https://docs.zizmor.sh/audits/a\\b",
        "https://docs.zizmor.sh/audits/?q=1&r=2",
        "https://docs.zizmor.sh/audits/#a@b",
        "https://www.shellcheck.net/wiki/SC2086\n[x](https://evil.example)",
        "https://www.shellcheck.net/wiki/SC2086\n",
        "https://docs.zizmor.sh/audits/\u0430rtipacked",  # a Cyrillic look-alike letter
        "https://docs.zizmor.sh/audits/" + "a" * 201,
    ],
)
def test_any_other_address_is_refused(url: str) -> None:
    assert not postable_docs(url)
    assert inert.docs_link(url) == ""


def links(markdown: str) -> list[str]:
    found: list[str] = []
    for block in MD.parse(markdown):
        for token in block.children or []:
            if token.type == "link_open":
                found.append(str(token.attrs["href"]))
    return found


def visible_live(markdown: str) -> list[str]:
    """What GitHub would make live in the text outside links and code (a link's own text aside)."""
    out: list[str] = []
    for block in MD.parse(markdown):
        inside = False
        for token in block.children or []:
            inside = {"link_open": True, "link_close": False}.get(token.type, inside)
            if token.type == "text" and not inside:
                out += [m.group(0) for m in LIVE.finditer(token.content)]
    return out


HOSTILE_MESSAGE = (
    "Double quote to prevent globbing: see https://evil.example and www.evil.example, ping @octocat"
)
DOCS = "https://www.shellcheck.net/wiki/SC2086"


def shell_finding(docs: str = DOCS, line: int = 1) -> Finding:
    return Finding(
        path="run.sh",
        line=line,
        severity=Severity.NIT,
        rule="shell/SC2086",
        message=HOSTILE_MESSAGE,
        fingerprint="f",
        docs=docs,
    )


def test_an_inline_comment_links_the_rule_and_nothing_the_pr_wrote() -> None:
    body = comment_body(shell_finding(), "a" * 40)
    assert links(body) == [DOCS]
    assert visible_live(body) == []


@pytest.mark.parametrize(
    "docs", ["https://evil.example/SC2086", "https://docs.zizmor.sh.evil.example/audits/"]
)
def test_a_link_a_tool_reported_from_the_files_is_not_posted(docs: str) -> None:
    body = comment_body(shell_finding(docs), "a" * 40)
    assert links(body) == [] and visible_live(body) == []


def test_the_review_body_links_the_rules_of_what_it_lists() -> None:
    # Outside the diff (line 9 is not commentable): listed in the body, with its link.
    result = ReviewResult(Verdict.COMMENT, "1 nit.", findings=(shell_finding(line=9),))
    plan = render.plan_review(
        result,
        head_sha="a" * 40,
        commentable={"run.sh": frozenset({1})},
        policy=render.Policy(approve=True, pr_by_bot=False),
        trigger=Trigger.MENTION,
        bot_name="revbot",
    )
    assert plan.comments == ()
    assert links(plan.body) == [DOCS]
    assert visible_live(plan.body) == []
    # the check run's summary is that body: the same link
    assert links(checkrun.check_summary(plan)) == [DOCS]


WORKFLOW = (
    "on: push\npermissions: {}\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n"
    "      - uses: actions/checkout@v4\n"
)


def zizmor_reporting(url: object, ident: str = "artipacked") -> Any:
    """zizmor's report on the workflow (its ``_zizmor`` stood in for): one finding on line 7
    whose ``url`` is ``url``, as the tool's output about the pull request's files carries it."""

    async def reported(
        self: WorkflowAnalyzer, command: list[str], files: Mapping[str, str], configs: Mapping[str, str]
    ) -> dict[str, list[dict[str, Any]]]:
        entry = {
            "ident": ident,
            "desc": "credential persistence through GitHub Actions artifacts",
            "url": url,
            "determinations": {"confidence": "Low", "severity": "Medium"},
            "line": 7,
            "feature": "uses: actions/checkout@v4",
            "locations": [],
        }
        return {path: [entry] for path in files}

    return reported


async def zizmor_finding(monkeypatch: pytest.MonkeyPatch, url: object, ident: str = "artipacked") -> Finding:
    monkeypatch.setattr(WorkflowAnalyzer, "_zizmor", zizmor_reporting(url, ident))
    file = changed(".github/workflows/ci.yml", None, WORKFLOW)
    item = FileUnderReview(file, parse_patch(file.patch), content(WORKFLOW))
    output = await run(WorkflowAnalyzer(command=["zizmor"]), item)
    [found] = output.findings
    return found


@pytest.mark.parametrize(
    ("url", "docs"),
    [
        # zizmor's own link, when it is one the bot may post, is kept as it is
        ("https://docs.zizmor.sh/audits/#artipacked", "https://docs.zizmor.sh/audits/#artipacked"),
        ("https://docs.zizmor.sh/audits/artipacked", "https://docs.zizmor.sh/audits/artipacked"),
        # anything else: the audit's section of zizmor's documentation
        ("https://evil.example/login", "https://docs.zizmor.sh/audits/#artipacked"),
        ("https://docs.zizmor.sh.evil.example/audits/", "https://docs.zizmor.sh/audits/#artipacked"),
        (
            "https://docs.zizmor.sh/audits/x)](https://evil.example",
            "https://docs.zizmor.sh/audits/#artipacked",
        ),
        ("javascript:alert(1)", "https://docs.zizmor.sh/audits/#artipacked"),
        (None, "https://docs.zizmor.sh/audits/#artipacked"),
        (["https://evil.example"], "https://docs.zizmor.sh/audits/#artipacked"),
    ],
)
async def test_zizmors_url_is_checked_before_it_is_linked(
    monkeypatch: pytest.MonkeyPatch, url: object, docs: str
) -> None:
    found = await zizmor_finding(monkeypatch, url)
    assert found.docs == docs
    assert "://" not in found.message and "evil" not in found.message
    body = comment_body(found, "a" * 40)
    assert links(body) == [docs]
    assert visible_live(body) == []


async def test_an_audit_name_that_is_no_plain_word_gets_no_link(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fallback is built from zizmor's audit id: one that could break out is not linked.
    found = await zizmor_finding(monkeypatch, "https://evil.example", ident="x)](https://evil.example")
    body = comment_body(found, "a" * 40)
    assert links(body) == []
    assert visible_live(body) == []


def test_the_terminal_report_names_the_page_the_review_links() -> None:
    kept, refused = shell_finding(), shell_finding("https://evil.example/SC2086", line=2)
    result = ReviewResult(Verdict.COMMENT, "2 nits.", findings=(kept, refused))
    data = json.loads(report.as_json(result, head_sha="a" * 40, review=None))
    assert [f["docs"] for f in data["findings"]] == [DOCS, None]
    text = report.as_text(result, label="local", head_sha="a" * 40).splitlines()
    assert [line.endswith(f"({DOCS})") for line in text if "shell/SC2086" in line] == [True, False]
    assert "evil.example/SC2086" not in "\n".join(text)
