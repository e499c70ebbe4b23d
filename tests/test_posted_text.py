"""What the bot posts is defused: no secret it found, no marker it did not write (issue 18 item 5).

Ruff's fix suggestions quote the PR's own line back to it; the bot reads its markers back from
what it posted. A suggestion that would re-quote a key or carry a marker-shaped string is
withheld, and only the bot's trailer (the whole-marker lines ending a body, outside code fences)
is ever read as its own.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.review.core.model import Finding, ReviewResult, Severity, Verdict
from app.review.output import checkrun, render
from app.review.output.comments import postable_suggestion
from app.review.rounds.markers import (
    FindingMarker,
    ReviewMarker,
    Trigger,
    carries,
    decode_all,
    encode,
    trailer,
)
from tests.harness import REPO, BotHarness, harness_with_decoy

AUTHOR = "alice"
DECOY = "revbot"
HEAD = "a" * 40
KEY = "AKIAQYLPMN5HHHFPZAM2"
REAL = FindingMarker(
    head_sha=HEAD, rule="python/F541", fingerprint="real", path="a.py", line=1, severity="nit"
).encode()
FORGED = FindingMarker(
    head_sha=HEAD, rule="python/F541", fingerprint="forged", path="a.py", line=1, severity="blocker"
).encode()


@pytest.mark.parametrize(
    ("body", "fingerprints"),
    [
        (f"text\n\n{REAL}", ["real"]),
        (f"text\n\n{REAL}\n", ["real"]),
        (f"text\r\n\r\n{REAL}\r\n", ["real"]),
        # a quoted marker before the bot's own: only the trailer counts
        (f"{FORGED}\n\n{REAL}", ["real"]),
        (f"```suggestion\n{FORGED}\n```\n\n{REAL}", ["real"]),
        (f"````suggestion\n```\n{FORGED}\n````\n\n{REAL}", ["real"]),
        (f"~~~\n{FORGED}\n~~~\n\n{REAL}", ["real"]),
        # a marker inside a sentence is not a marker line
        (f"see {FORGED}", []),
        (f"{REAL}\nquoted after it", []),
        # a fence that never closes holds everything after it
        (f"```suggestion\n{FORGED}", []),
        (f"```\n\n{FORGED}\n{REAL}", []),
        # a longer run closes a fence; a shorter one does not
        (f"```\nx\n````\n{REAL}", ["real"]),
        (f"````\nx\n```\n{FORGED}", []),
        # the body of a review: its markers in a row
        (f"text\n{REAL}\n{FORGED}", ["real", "forged"]),
        ("", []),
        (None, []),
    ],
)
def test_only_the_trailer_outside_fences_is_read(body: str | None, fingerprints: list[str]) -> None:
    assert [m.fingerprint for m in FindingMarker.read_all(body)] == fingerprints
    last = FindingMarker.read(body)
    assert (last.fingerprint if last else None) == (fingerprints[-1] if fingerprints else None)


def test_the_last_review_marker_is_the_bots() -> None:
    forged = ReviewMarker(head_sha="f" * 40, trigger=Trigger.DECOY, verdict="APPROVE", findings=0)
    real = ReviewMarker(head_sha=HEAD, trigger=Trigger.MENTION, verdict="COMMENT", findings=1)
    assert ReviewMarker.read(f"```\n{forged.encode()}\n```\n{real.encode()}") == real
    assert ReviewMarker.read(f"{forged.encode()}\n{real.encode()}") == real
    note = encode("note", key="k")
    assert carries(f"said\n\n{note}", note)
    assert not carries(f"quoting `{note}` here\n\n{encode('note', key='other')}", note)
    assert trailer(f"x\n{note}\n\n") == [note]


def nit(suggestion: str) -> Finding:
    return Finding(
        path="a.py",
        line=1,
        severity=Severity.NIT,
        rule="python/F541",
        message="f-string without any placeholders (F541)",
        fingerprint="fp",
        suggestion=suggestion,
    )


@pytest.mark.parametrize(
    ("suggestion", "posted"),
    [
        ('x = "plain"\n', True),
        ("", True),
        (f'key = "{KEY}"\n', False),
        ('x = "<!-- hidden"\n', False),
        ('x = "end -->"\n', False),
        (f"x = '{FORGED}'\n", False),
    ],
)
def test_a_suggestion_is_posted_verbatim_or_withheld(suggestion: str, posted: bool) -> None:
    assert postable_suggestion(suggestion) is posted
    result = ReviewResult(verdict=Verdict.COMMENT, summary="s", findings=(nit(suggestion),))
    plan = render.plan_review(
        result,
        head_sha=HEAD,
        commentable={"a.py": frozenset({1})},
        policy=render.Policy(approve=True, pr_by_bot=False),
        trigger=Trigger.MENTION,
        bot_name="revbot",
    )
    [comment] = plan.comments
    assert (f"```suggestion\n{suggestion}```" in comment["body"]) is posted
    assert ("suggested fix is withheld" in comment["body"]) is not posted
    assert KEY not in comment["body"]
    assert [m.fingerprint for m in FindingMarker.read_all(comment["body"])] == ["fp"]


def test_messages_paths_and_annotations_never_quote_a_key() -> None:
    leaky = Finding(
        path=f"conf/{KEY}.py",
        line=1,
        severity=Severity.CONCERN,
        rule="python/F841",
        message=f"Local variable `{KEY}` is assigned to but never used",
        fingerprint="fp",
    )
    result = ReviewResult(verdict=Verdict.COMMENT, summary=f"summary {KEY}", findings=(leaky,))
    plan = render.plan_review(
        result,
        head_sha=HEAD,
        commentable={},
        policy=render.Policy(approve=True, pr_by_bot=False),
        trigger=Trigger.MENTION,
        bot_name="revbot",
    )
    # The hidden marker keeps the path as GitHub names the file (it is matched against it later).
    assert KEY not in checkrun.check_summary(plan)
    assert f"conf/{KEY}.py" not in plan.body.replace(f'"path":"conf/{KEY}.py"', "")
    assert KEY not in json.dumps(checkrun.check_annotations(result)).replace(f'"path": "conf/{KEY}.py"', "")
    assert len(decode_all(plan.body, "finding")) == 1


# ------------------------------------------------------------------ end to end, through the fake


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[BotHarness]:
    async with harness_with_decoy(tmp_path, DECOY) as harness:
        yield harness


def sent_to_github(bot: BotHarness) -> str:
    return "\n".join(json.dumps(c.body) + json.dumps(c.variables) for c in bot.fake.calls)


def root_comment(bot: BotHarness, number: int, path: str) -> tuple[str, bool]:
    pull = bot.fake.world.pull(bot.fake.world.repo(REPO), number)
    for thread in bot.fake.world.threads_of(pull):
        root = bot.fake.world.review_comments[thread.comment_ids[0]]
        if root.path == path:
            return root.body, thread.is_resolved
    raise AssertionError(f"no thread on {path}")


@pytest.mark.slow
async def test_a_ruff_suggestion_never_requotes_a_key_the_secrets_finding_masks(bot: BotHarness) -> None:
    number = bot.open_pull({"src/settings.py": f'AWS_KEY = f"{KEY}"\n'}, author=AUTHOR)
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    body, _ = root_comment(bot, number, "src/settings.py")
    assert KEY not in body
    # Both findings of the line, in one comment (the blocker leads); the line's F541 fix is not
    # offered there (one click fixes one finding, not the line's all), so nothing re-quotes the key.
    [comment] = bot.fake.world.review_comments.values()
    rules = [line.split(" · ")[1] for line in comment.body.splitlines() if line.startswith("**")]
    assert rules == ["`secrets/aws-access-key`", "`python/F541`"]
    assert "```suggestion" not in comment.body
    assert KEY not in sent_to_github(bot)


@pytest.mark.slow
async def test_a_forged_marker_in_a_pull_request_cannot_resolve_the_bots_thread(bot: BotHarness) -> None:
    # Ruff's F541 fix turns the doubled braces into single ones: its suggestion is a marker.
    forged = FORGED.replace("a.py", "src/forged.py").replace("{", "{{").replace("}", "}}")
    number = bot.open_pull({"src/forged.py": f"note = f'{forged}'\n"}, author=AUTHOR)
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    bot.fake.push(REPO, "feature", {"README.md": "# widgets, again\n"})
    await bot.drain()
    body, resolved = root_comment(bot, number, "src/forged.py")
    assert not resolved  # the problem is still there at the new head
    assert "python/F541" in body
    assert [m.fingerprint for m in FindingMarker.read_all(body)] != ["forged"]
    assert body.count("<!--") == 1  # the bot's own marker, and nothing else opens a comment
