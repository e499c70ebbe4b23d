"""The replay's small decisions: the settings it plays with, what a merge commit says, which
lines a comment may sit on, how trees turn into commits, which findings were posted again,
which blockers stand at the merge, and what counts as a crash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from app.replay.history import MergedPull, Push, _title_and_body, changes, merged_pulls
from app.replay.measure import in_diff, measure, reposted
from app.replay.play import Played, login_of, replay_config
from app.review.core.model import Finding, ReviewResult, Severity, Verdict
from app.review.rounds.markers import FindingMarker, ReviewMarker, Trigger
from app.sandbox import Call, FakeGitHub
from app.sandbox.diff import diff_trees
from app.sandbox.state import ReviewComment
from app.settings.repoconfig import RepoConfig
from tests.replay_repo import Repo


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, {"review": {"on_push": True}}),
        ("", {"review": {"on_push": True}}),
        (
            "readiness:\n  quiet_minutes: 5\n",
            {"readiness": {"quiet_minutes": 5}, "review": {"on_push": True}},
        ),
        ("review:\n  on_push: false\n  max_comments: 3\n", {"review": {"on_push": True, "max_comments": 3}}),
    ],
)
def test_the_repository_settings_apply_with_review_on_push(text: str | None, expected: object) -> None:
    assert yaml.safe_load(replay_config(text)) == expected


@pytest.mark.parametrize("text", ["review: [1, 2]\n", "- a list\n", "review: {on_push: [\n"])
def test_settings_the_bot_cannot_use_stay_as_they_are(text: str) -> None:
    assert replay_config(text) == text  # the bot reports the file, as it would on GitHub


@pytest.mark.parametrize(
    ("subject", "body", "expected"),
    [
        ("Merge pull request #12 from a/b", "Fix it\n\nLonger text.", (12, "Fix it", "Longer text.")),
        ("Merge pull request #7 from a/b", "", (7, "Merge pull request #7 from a/b", "")),
        (
            "Add pathlib support to `edit` (#3781)",
            "Details",
            (3781, "Add pathlib support to `edit`", "Details"),
        ),
        ("Merge branch 'stable'", " notes ", (None, "Merge branch 'stable'", "notes")),
    ],
)
def test_a_merge_commit_names_its_pull_request(subject: str, body: str, expected: tuple[object, ...]) -> None:
    assert _title_and_body(subject, body) == expected


@pytest.mark.parametrize(
    ("name", "login"),
    [("Alice Liddell", "Alice-Liddell"), ("  ", "author"), ("revbot", "revbot-author"), ("Zoë 🐍", "Zo")],
)
def test_authors_get_a_login_that_is_never_the_decoy(name: str, login: str) -> None:
    assert login_of(name) == login


def comment(path: str, line: int | None, *, side: str = "RIGHT", subject_type: str = "line") -> ReviewComment:
    return ReviewComment(
        id=1, node_id="n", repo="r", number=1, review_id=1, thread_id="t", user="u", body="b", path=path,
        line=line, original_line=line, side=side, start_line=None, original_start_line=None, start_side=None,
        commit_id="c", original_commit_id="c", diff_hunk="", position=None, original_position=1,
        in_reply_to_id=None, created_at="", updated_at="", author_association="NONE",
        subject_type=subject_type,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("where", "inside"),
    [
        (comment("a.py", 3), True),  # the added line
        (comment("a.py", 2), False),  # context: a line the PR did not touch
        (comment("a.py", 3, side="LEFT"), True),  # the removed line, on the old side
        (comment("a.py", 2, side="LEFT"), False),
        (comment("a.py", None, subject_type="file"), True),
        (comment("b.py", 1), False),  # a file the PR did not change
    ],
)
def test_a_comment_is_in_the_diff_only_on_a_line_the_pr_changed(where: ReviewComment, inside: bool) -> None:
    old = {"a.py": "one\ntwo\nold\n", "b.py": "same\n"}
    new = {"a.py": "one\ntwo\nthree\n", "b.py": "same\n"}
    assert in_diff(diff_trees(old, new), where) is inside


def test_changes_turn_one_tree_into_the_next() -> None:
    old = {"kept": "k", "edited": "1", "gone": "g"}
    new = {"kept": "k", "edited": "2", "added": "a"}
    assert changes(old, new) == {"gone": None, "edited": "2", "added": "a"}
    applied = {**old, **changes(old, new)}
    assert {path: text for path, text in applied.items() if text is not None} == new


# ------------------------------------------------------------------------------ re-posted findings
REPO = "octo/widgets"
BOT = "revbot[bot]"


def review_call(fake: FakeGitHub, number: int, review_id: int) -> Call:
    """The bot's request that posted a review, as the fake records it."""
    path = f"/repos/{REPO}/pulls/{number}/reviews"
    return Call("POST", path, {}, {}, 200, "token", 77, response={"id": review_id})


def thread_call(thread: str, *, resolved: bool) -> Call:
    name = "resolveReviewThread" if resolved else "unresolveReviewThread"
    document = (
        f"mutation M($threadId: ID!) {{ {name}(input: {{threadId: $threadId}}) {{ thread {{ id }} }} }}"
    )
    return Call(
        "POST", "/graphql", {}, {}, 200, "token", 77, graphql=document, variables={"threadId": thread}
    )


def bot_review(fake: FakeGitHub, number: int, *findings: tuple[str, str, int, str]) -> tuple[int, str]:
    """A review of the bot's with inline findings (fingerprint, path, line, rule); its id, and
    the thread of its first comment."""
    repo = fake.world.repo(REPO)
    specs = [
        {
            "path": path,
            "line": line,
            "side": "RIGHT",
            "body": "A finding.\n\n"
            + FindingMarker("head", rule, fingerprint, path, line, "blocker").encode(),
        }
        for fingerprint, path, line, rule in findings
    ]
    review = fake.actions.create_review(
        repo, fake.world.pull(repo, number), BOT, body="review", event="COMMENT", comments=specs,
        commit_id=None, emit=lambda *_: None,
    )  # fmt: skip
    return review.id, fake.world.review_comments[review.comment_ids[0]].thread_id


UNDEFINED = ("fp-1", "a.py", 2, "python/F821")  # on line 2 of a.py, "two"


@pytest.fixture
def pull() -> tuple[FakeGitHub, int]:
    fake = FakeGitHub(app_id=1, app_slug="revbot", webhook_secret="s")
    fake.add_installation(77, "octo")
    fake.add_repo(REPO, installation_id=77)
    fake.push(REPO, "main", {"a.py": "one\n"})
    fake.push(REPO, "feature", {"a.py": "one\ntwo\n", "b.py": "  two\n"})
    return fake, int(fake.open_pull(REPO, head="feature", author="alice")["number"])


def count(fake: FakeGitHub, number: int, *calls: Call) -> int:
    return reposted(fake, calls, f"/repos/{REPO}/pulls/{number}/reviews")


def test_a_finding_posted_again_while_its_thread_is_open_is_reposted(pull: tuple[FakeGitHub, int]) -> None:
    fake, number = pull
    first, _ = bot_review(fake, number, UNDEFINED)
    again, _ = bot_review(fake, number, UNDEFINED)
    other_rule, _ = bot_review(fake, number, ("fp-2", "a.py", 2, "python/F401"))
    moved_file, _ = bot_review(fake, number, ("fp-3", "b.py", 1, "python/F821"))  # same rule, same text
    reviews = [review_call(fake, number, i) for i in (first, again, other_rule, moved_file)]
    assert count(fake, number, *reviews) == 2  # "again" and the one in the other file


def test_one_review_never_reposts_its_own_findings(pull: tuple[FakeGitHub, int]) -> None:
    fake, number = pull
    both, _ = bot_review(fake, number, UNDEFINED, ("fp-3", "b.py", 1, "python/F821"))
    assert count(fake, number, review_call(fake, number, both)) == 0


def test_a_finding_posted_again_after_its_thread_was_resolved_is_not(pull: tuple[FakeGitHub, int]) -> None:
    fake, number = pull
    first, thread = bot_review(fake, number, UNDEFINED)
    again, _ = bot_review(fake, number, UNDEFINED)
    third, _ = bot_review(fake, number, UNDEFINED)
    resolved_between = [review_call(fake, number, first), thread_call(thread, resolved=True)]
    assert count(fake, number, *resolved_between, review_call(fake, number, again)) == 0
    # reopened, then the same finding posted again: the second comment's thread is open too
    reopened = [*resolved_between, thread_call(thread, resolved=False), review_call(fake, number, again)]
    assert count(fake, number, *reopened, review_call(fake, number, third)) == 2


def test_a_finding_a_comment_held_beside_another_is_reposted_when_posted_alone(
    pull: tuple[FakeGitHub, int],
) -> None:
    """One comment holds the line's two findings (and the same problem in another file): any of
    them posted again while its thread is open is a re-post."""
    fake, number = pull
    held = [("fp-2", "a.py", 2, "python/F401"), ("fp-3", "b.py", 1, "python/F821"), UNDEFINED]
    body = "Findings.\n\n" + "\n".join(
        FindingMarker("head", rule, fp, path, line, "blocker").encode() for fp, path, line, rule in held
    )
    repo = fake.world.repo(REPO)
    spec = {"path": "a.py", "line": 2, "side": "RIGHT", "body": body}
    merged = fake.actions.create_review(
        repo, fake.world.pull(repo, number), BOT, body="review", event="COMMENT", comments=[spec],
        commit_id=None, emit=lambda *_: None,
    ).id  # fmt: skip
    alone, _ = bot_review(fake, number, ("fp-4", "a.py", 2, "python/F401"))  # same rule, same line
    elsewhere, _ = bot_review(fake, number, ("fp-3", "b.py", 1, "python/F821"))
    reviews = [review_call(fake, number, i) for i in (merged, alone, elsewhere)]
    assert count(fake, number, *reviews) == 2


# ------------------------------------------------------------------------------ blockers and crashes
def played(fake: FakeGitHub, number: int, final: ReviewResult | None, **extra: Any) -> Played:
    world = fake.world
    head = world.pull(world.repo(REPO), number).head_sha
    merged = MergedPull("m" * 40, 5, "A PR", "", 0.0, (Push(head, "b", 0.0, "alice", "Add it"),))
    base = world.repo(REPO).branches["main"]
    return Played(
        merged, REPO, number, RepoConfig(), {head: base}, slice(0, len(fake.calls)), final=final, **extra
    )


def blocking_review(fake: FakeGitHub, number: int, verdict: str = "REQUEST_CHANGES") -> None:
    """The bot's review (its marker says ``verdict``) with the undefined name, as a request it made."""
    review_id, _ = bot_review(fake, number, UNDEFINED)
    review = fake.world.reviews[review_id]
    review.body = "review\n\n" + ReviewMarker(review.commit_id, Trigger.DECOY, verdict, 1).encode()
    fake.calls.append(review_call(fake, number, review_id))


def result(*fingerprints: str) -> ReviewResult:
    findings = tuple(
        Finding("a.py", 2, Severity.BLOCKER, "python/F821", "Undefined.", fp) for fp in fingerprints
    )
    return ReviewResult(
        Verdict.REQUEST_CHANGES if findings else Verdict.APPROVE, "", findings, analysed=("a.py",)
    )


@pytest.mark.parametrize(
    ("verdict", "final", "blockers", "fixed"),
    [
        ("REQUEST_CHANGES", result("fp-1"), ["python/F821 at a.py:2"], 0),  # still there, still blocking
        ("REQUEST_CHANGES", result(), [], 1),  # fixed by the author before the merge
        ("COMMENT", result("fp-1"), [], 0),  # there, but the bot's standing review does not block
        ("REQUEST_CHANGES", None, ["python/F821 at a.py:2"], 0),  # no re-check: cannot say it is gone
    ],
)
def test_blockers_stand_at_the_merge_when_the_bot_still_blocks_and_they_are_there(
    pull: tuple[FakeGitHub, int], verdict: str, final: ReviewResult | None, blockers: list[str], fixed: int
) -> None:
    fake, number = pull
    blocking_review(fake, number, verdict)
    report = measure(fake, played(fake, number, final)).as_dict()
    assert (report["rounds"], report["comments"], report["flagged"]) == (1, 1, 1)
    assert (report["blockers_at_merge"], report["fixed_by_author"]) == (blockers, fixed)
    assert report["blocks_raised"] == (verdict == "REQUEST_CHANGES")


def test_a_blocker_in_a_file_renamed_before_the_merge_still_stands(pull: tuple[FakeGitHub, int]) -> None:
    fake, number = pull
    world = fake.world
    flagged_at = world.pull(world.repo(REPO), number).head_sha
    marker = FindingMarker(flagged_at, "python/F821", "fp-1", "a.py", 2, "blocker", content="undefined-two")
    review = fake.actions.create_review(
        world.repo(REPO), world.pull(world.repo(REPO), number), BOT, event="REQUEST_CHANGES",
        body="review\n\n" + ReviewMarker(flagged_at, Trigger.DECOY, "REQUEST_CHANGES", 1).encode(),
        comments=[{"path": "a.py", "line": 2, "side": "RIGHT", "body": "A finding.\n\n" + marker.encode()}],
        commit_id=None, emit=lambda *_: None,
    )  # fmt: skip
    fake.calls.append(review_call(fake, number, review.id))
    merged_head = fake.push(REPO, "feature", {"a.py": None, "c.py": "one\ntwo\n", "b.py": "  two\n"})
    base = world.repo(REPO).branches["main"]
    pushes = (
        Push(flagged_at, base, 0.0, "alice", "Add it"),
        Push(merged_head, base, 1.0, "alice", "Rename it"),
    )
    # At the merged head the analysis still reports it, in c.py (so under another fingerprint).
    there = Finding("c.py", 2, Severity.BLOCKER, "python/F821", "Undefined.", "fp-c", content="undefined-two")
    final = ReviewResult(Verdict.REQUEST_CHANGES, "", (there,), analysed=("c.py",))
    merged = MergedPull("m" * 40, 5, "A PR", "", 0.0, pushes)
    played = Played(
        merged, REPO, number, RepoConfig(), {flagged_at: base, merged_head: base}, slice(0, len(fake.calls)),
        final=final,
    )  # fmt: skip
    report = measure(fake, played).as_dict()
    assert (report["blockers_at_merge"], report["fixed_by_author"]) == (["python/F821 at a.py:2"], 0)


def test_crashes_are_the_errors_logged_or_the_jobs_that_failed(pull: tuple[FakeGitHub, int]) -> None:
    fake, number = pull
    logged = played(
        fake, number, result(), errors=["app.jobs.worker: job failed", "app.jobs.worker: slot stopped"]
    )
    assert measure(fake, logged).crashes == 2
    unlogged = measure(fake, played(fake, number, result(), failed_jobs=1))
    assert (unlogged.crashes, unlogged.crash_messages) == (1, ["1 job(s) failed"])
    assert measure(fake, played(fake, number, result())).crashes == 0


async def test_a_merge_of_a_history_that_never_met_the_branch_is_no_pull_request(tmp_path: Path) -> None:
    repo = Repo(tmp_path)
    repo.git("init", "-q", "-b", "main")
    repo.commit({"a.py": "a = 1\n"}, "Initial")
    repo.git("checkout", "-q", "--orphan", "vendored")
    repo.commit({"b.py": "b = 1\n"}, "Another project")
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--allow-unrelated-histories", "vendored", "-m", "Merge the vendored project")
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit({"a.py": "a = 2\n"}, "Change a")
    repo.merge("feature", 4, "Change a")
    assert [p.number for p in await merged_pulls(tmp_path, limit=5)] == [4]
