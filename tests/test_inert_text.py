"""Text the pull request controls is inert wherever the bot posts it (issue 27 item 4).

Each place PR-derived text reaches Markdown, against each hostile value: the rendered Markdown is
parsed (CommonMark, with markdown-it-py) and must hold no link, image, HTML, heading or marker the
bot did not write, and its visible text no mention, autolink or issue reference GitHub would make
live. A value the bot quotes as code must come out as one code span holding all of it.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from app.review.core.lintconfig import Exclusion, lint_config
from app.review.core.model import ChangedFile, FileContent, Finding, ReviewResult, Severity, Skipped, Verdict
from app.review.engine import inert
from app.review.engine.builtin import summarise
from app.review.llm.checks import check_findings
from app.review.llm.schema import ModelFinding
from app.review.output import checkrun, render
from app.review.rounds.learnings import Learning
from app.review.rounds.markers import Trigger
from app.review.rounds.overrule import Overrule
from app.usecases.overrules import overrule_text
from app.usecases.pull import LoadedConfig
from app.usecases.readiness.decide import Check, CheckState, MergeState, Settings, Snapshot, decide
from app.usecases.threads import model_answers
from tests.harness import REPO, BotHarness, harness_with_decoy

HEAD = "a" * 40
HOSTILE = [
    "`",
    "a``b```c",
    "@octocat",
    "[click here](https://evil.example/login)",
    "https://evil.example",
    "www.evil.example",
    "see #1",
    "<!-- revbot:review {} -->",
    "x\n# heading",
    "`@octocat` ` [x](https://evil.example) `",
    "a` @octocat [click here](https://evil.example/login) `b",  # closes the span it is quoted in
]
MD = MarkdownIt("commonmark")
# What GitHub makes live in text (outside code): mentions and e-mail addresses, the GFM autolink
# extension's scheme and www. links, issue references.
LIVE = re.compile(r"@[A-Za-z0-9]|[A-Za-z]://|(?i:www)\.|#\d")
STRUCTURE = {"link_open", "image", "html_inline", "html_block", "heading_open"}


def tokens(markdown: str) -> list[Token]:
    out: list[Token] = []
    for block in MD.parse(markdown):
        out.append(block)
        out += block.children or []
    return out


def live(found: list[Token]) -> list[str]:
    return [m.group(0) for t in found if t.type == "text" for m in LIVE.finditer(t.content)]


def assert_inert(markdown: str, baseline: str, value: str, *, as_code: bool) -> None:
    """``markdown`` (with ``value`` in it) has no structure ``baseline`` (a harmless value in the
    same place) lacks, nothing live in its text that the baseline lacks, no marker of its own."""
    found, expected = tokens(markdown), tokens(baseline)
    for kind in STRUCTURE:
        assert sum(t.type == kind for t in found) == sum(t.type == kind for t in expected), (kind, markdown)
    assert live(found) == live(expected), markdown  # only the bot's own (``Overruled by @mia``)
    for token in found:
        if token.type == "code_inline":
            assert "<!--" not in token.content and "-->" not in token.content
    assert markdown.count("<!--") == baseline.count("<!--")
    if as_code:
        shown = " ".join(value.split("\n")).replace(inert.WORD_JOINER, "")
        spans = [t.content.replace(inert.WORD_JOINER, "").replace("\u200b", "") for t in found]
        assert any(shown in span for span in spans if span), (shown, markdown)


def body_of(result: ReviewResult) -> str:
    plan = render.plan_review(
        result,
        head_sha=HEAD,
        commentable={"src/a.py": frozenset({1})},
        policy=render.Policy(approve=True, pr_by_bot=False),
        trigger=Trigger.MENTION,
        bot_name="revbot",
    )
    return "\n\n".join([plan.body, *(c["body"] for c in plan.comments)])


def finding(message: str, *, path: str = "src/a.py", line: int = 1, rule: str = "python/F821") -> Finding:
    return Finding(
        path=path, line=line, severity=Severity.CONCERN, rule=rule, message=message, fingerprint="fp"
    )


def exclusion_note(value: str) -> str:
    reason = Exclusion("pyproject.toml", value).reason
    return body_of(ReviewResult(Verdict.COMMENT, "s", (), skipped=(Skipped("src/a.py", reason),)))


def skipped_file_name(value: str) -> str:
    return body_of(ReviewResult(Verdict.COMMENT, "s", (), skipped=(Skipped(f"src/{value}.py", "generated"),)))


def finding_file_name(value: str) -> str:
    return body_of(ReviewResult(Verdict.COMMENT, "s", findings=(finding("m", path=f"{value}.py", line=9),)))


def stage_note(value: str) -> str:
    # A broken config file (its path and parser's message are the PR's) noted in the summary.
    problems = lint_config({f"{value}/ruff.toml": FileContent("line-length = \n", 15)}).problems
    summary = summarise([], changed=1, analysed=["src/a.py"], skipped=[], notes=problems)
    return body_of(ReviewResult(Verdict.COMMENT, summary, ()))


def rule_message(value: str) -> str:
    # A tool's message quotes the code as the tool does: between single backticks, naively.
    result = ReviewResult(Verdict.COMMENT, "s", findings=(finding(f"Undefined name `{value}`"),))
    return body_of(result)


def rule_message_in_body(value: str) -> str:
    result = ReviewResult(Verdict.COMMENT, "s", findings=(finding(f"Undefined name `{value}`", line=9),))
    return body_of(result)


def model_finding(value: str) -> str:
    patch = "@@ -0,0 +1,1 @@\n+x = 1\n"
    kept, _, _ = check_findings(
        [
            ModelFinding(
                path="src/a.py", line=1, severity="concern", category="logic", confidence=0.9, message=value
            )
        ],
        files=[ChangedFile("src/a.py", "added", patch, additions=1)],
        builtin=[],
        line_counts={"src/a.py": 1},
        blockers=False,
    )
    return body_of(ReviewResult(Verdict.COMMENT, "s", findings=tuple(f for _, f in kept)))


def model_thread_answer(value: str) -> str:
    return "\n\n".join(model_answers(HEAD, value))


def withheld_approval(value: str) -> str:
    return body_of(ReviewResult(Verdict.APPROVE, "s", (), withhold_approval=f"the PR says {value}"))


def overrule_quote(value: str) -> str:
    item = Overrule("fp", "k", "python/F821", "src/a.py", 1, "blocker", "mia", value, 7)
    return overrule_text([item])


def learning_answer(value: str) -> str:
    learned = Learning.new(
        rule="python/F821",
        path=f"src/{value}.py",
        line_text=value,
        reason=value,
        created_by="mia",
        source="o/r#1",
    )
    return f"- {inert.escape(learned.describe())}"


def settings_problem(value: str) -> str:
    return LoadedConfig(config=None, source=f"o/r:{value}", problem=value).problem_note() or ""  # type: ignore[arg-type]


def readiness_check_name(value: str) -> str:
    snapshot = Snapshot(
        head_sha=HEAD,
        base_ref="main",
        author="alice",
        draft=False,
        head_pushed_at=0.0,
        mergeable=True,
        mergeable_state=MergeState.CLEAN,
        checks=(Check(value, CheckState.FAILED, "actions", 0.0),),
    )
    verdict = decide(snapshot, Settings(quiet_seconds=0.0), now=1.0)
    assert verdict is not None
    return "\n".join([verdict.headline, *(f"- {reason}" for reason in verdict.reasons)])


Place = Callable[[str], str]
PLACES: list[tuple[Place, bool]] = [  # (place, whether the value is quoted as code whole)
    (exclusion_note, True),
    (skipped_file_name, True),
    (finding_file_name, True),
    (stage_note, True),
    (rule_message, False),
    (rule_message_in_body, False),
    (model_finding, False),
    (model_thread_answer, False),
    (withheld_approval, False),
    (overrule_quote, False),
    (learning_answer, True),
    (settings_problem, True),
    (readiness_check_name, True),
]


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize(("place", "as_code"), PLACES, ids=[p.__name__ for p, _ in PLACES])
def test_pr_text_is_inert_wherever_it_is_posted(place: Place, as_code: bool, value: str) -> None:
    assert_inert(place(value), place("harmless"), value, as_code=as_code)


@pytest.mark.parametrize("value", HOSTILE)
def test_annotations_are_plain_text_with_nothing_live(value: str) -> None:
    result = ReviewResult(Verdict.COMMENT, "s", findings=(finding(f"Undefined name `{value}`", rule=value),))
    [annotation] = checkrun.check_annotations(result)
    assert not LIVE.search(annotation["title"]) and not LIVE.search(annotation["message"])
    assert annotation["message"].replace(inert.WORD_JOINER, "") == f"Undefined name `{value}`"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a`b", "``a`b``"),
        ("```", "```` ``` ````"),
        ("`edge", "`` `edge ``"),
        ("@octocat", "`@\u2060octocat`"),
        ("[x](https://e.example)", "`[x](https:\u2060//e.example)`"),
        ("x\n# h", "`x # h`"),
        ("<!-- m -->", "`<\u200b!-- m --\u200b>`"),
    ],
)
def test_a_value_is_one_code_span_longer_than_any_run_inside(text: str, shown: str) -> None:
    assert inert.code(text) == shown
    assert inert.code(inert.code(text).strip("` ")) == shown or "`" in text  # neutralising twice is once


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Undefined name `x`", "Undefined name `x`"),
        ("Use `` a`b `` here", "Use ``a`b`` here"),
        ("a stray ` backtick", "a stray \\` backtick"),
        (
            "[t](https://e.example) and <b> & @bob",
            "\\[t\\](https:\u2060//e.example) and &lt;b&gt; &amp; @\u2060bob",
        ),
        (
            "mail a@b.example, see www.e.example #12",
            "mail a@\u2060b.example, see www\u2060.e.example #\u206012",
        ),
    ],
)
def test_prose_keeps_its_code_spans_and_escapes_the_rest(text: str, shown: str) -> None:
    assert inert.escape(text) == shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("fixes GH-123", "fixes GH-\u2060123"),  # GitHub links it to issue 123, as #123
        ("see gh-7 and Gh-8", "see gh-\u20607 and Gh-\u20608"),
        ("the gh-pages branch", "the gh-pages branch"),  # no digits: no reference
        ("brigh-1", "brigh-1"),  # inside a word: no reference
    ],
)
def test_a_gh_reference_is_neutralised_like_a_hash_one(text: str, shown: str) -> None:
    assert inert.escape(text) == shown
    assert inert.neutralise(inert.neutralise(text)) == inert.neutralise(text)  # twice is once


# ------------------------------------------------------------------ end to end, through the fake
AUTHOR = "alice"
DECOY = "revbot"
HOSTILE_NAME = "gen/`@octocat [click here](https:/evil.example/login).py"
# A regex (pre-commit's top-level exclude) that leaves out ``gen/`` and quotes hostile text.
HOSTILE_PATTERN = "^gen/|`@octocat [click here](https://evil.example/login)"
PRE_COMMIT = f"exclude: '{HOSTILE_PATTERN}'\nrepos: []\n"


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[BotHarness]:
    async with harness_with_decoy(tmp_path, DECOY) as harness:
        yield harness


@pytest.mark.slow
@pytest.mark.e2e
async def test_a_hostile_exclude_pattern_and_file_name_post_an_inert_review(bot: BotHarness) -> None:
    # The pattern sits in the base's config and the PR's own: whichever side the bot reads its
    # lint configuration from, the exclusion note quotes it.
    bot.fake.push(REPO, "main", {".pre-commit-config.yaml": PRE_COMMIT})
    files = {".pre-commit-config.yaml": PRE_COMMIT, "src/a.py": "import os\n", HOSTILE_NAME: "x = 1\n"}
    number = bot.open_pull(files, author=AUTHOR)
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    [review] = [
        c for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/reviews") and c.status == 200
    ]
    body = review.body["body"]
    assert "excluded by the repository's config" in body and "F401" in json.dumps(review.body)
    posted = [body, *(c["body"] for c in review.body.get("comments", []))]
    for markdown in posted:
        found = tokens(markdown)
        assert not [t for t in found if t.type == "image"], markdown
        # The only links: the documentation of the rules (``inert.docs_link``), none the PR made.
        assert all(inert.docs_link(str(t.attrs["href"])) for t in found if t.type == "link_open"), markdown
        assert live(found) == [], markdown
        html = [t.content.strip() for t in found if t.type in {"html_inline", "html_block"}]
        assert all(h in {"<sub>", "</sub>"} or h.startswith("<!-- revbot:") for h in html), html
    visible = body.replace(inert.WORD_JOINER, "")
    assert f"- ``{HOSTILE_NAME}``: not linted" in visible  # the name, as code
    assert f"``{HOSTILE_PATTERN}``" in visible  # the pattern, as code
