"""The bot's own links work; what the pull request wrote stays inert (``inert.docs_link``).

Every rule link used to be dead: it sat in the message, and the defuser put a word joiner into
``https://`` and ``www.`` there as it must for text the pull request controls. A posted comment
is rendered as GitHub's Markdown would (CommonMark, with markdown-it-py) and both kinds followed:
the documentation is one live link to the exact address, the tool's quoted text none."""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

from app.review.core.model import Finding, ReviewResult, Severity, Verdict
from app.review.engine import inert
from app.review.output import render
from app.review.output.comments import comment_body
from app.review.rounds.markers import Trigger

MD = MarkdownIt("commonmark")
LIVE = re.compile(r"@[A-Za-z0-9]|[A-Za-z]://|(?i:www)\.|#\d")  # what GitHub makes live in text


@pytest.mark.parametrize(
    ("url", "live"),
    [
        ("https://www.shellcheck.net/wiki/SC2086", True),
        ("https://github.com/hadolint/hadolint/wiki/DL3007", True),
        ("https://docs.zizmor.sh/audits/#template-injection", True),
        ("https://docs.astral.sh/ruff/rules/undefined-name", True),
        ("https://docs.github.com/actions/writing-workflows/workflow-syntax-for-github-actions", True),
        ("", False),
        ("http://www.shellcheck.net/wiki/SC2086", False),  # not https
        ("javascript:alert(1)//https://docs.zizmor.sh/audits/", False),
        ("https://docs.zizmor.sh.evil.example/audits/", False),  # a look-alike host
        ("https://evil.example/?https://docs.zizmor.sh/audits/", False),
        ("https://docs.zizmor.sh/audits/x)](https://evil.example", False),  # ends the link
        ("https://docs.zizmor.sh/audits/%2e%2e/x", False),  # escapes
        ("https://docs.zizmor.sh/audits/a b", False),
        ('https://docs.zizmor.sh/audits/a"onmouseover=x', False),
        ("https://www.shellcheck.net/wiki/SC2086\n[x](https://evil.example)", False),
        ("https://github.com/hadolint/hadolint/issues/1", False),  # not the wiki
    ],
)
def test_which_links_are_posted_live(url: str, live: bool) -> None:
    assert bool(inert.docs_link(url)) is live


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
