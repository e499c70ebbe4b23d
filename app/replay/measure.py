"""What the bot did on one replayed pull request, read from the fake's record of it.

The fake keeps every request the bot made (``calls``, in order) and the state it left (reviews,
threads, comments, check runs). From them, per pull request:

- **rounds**: reviews the bot posted (each carries its review marker), and the inline comments
  (new threads) of each;
- **reposted**: an inline comment for a finding a bot thread opened by an earlier review still
  holds, open when it was posted (the order of the bot's requests says which were open then):
  the same fingerprint, or the same rule on the same line text in any file (a line moved to
  another file, a file renamed);
- **outside_diff**: an inline comment on a line the PR did not add or change (a line of the diff
  between the PR's base and the head it was posted on; a file comment counts if the file changed);
- **blocks raised / dismissed**, **resolved_verified** (bot threads the bot resolved);
- **flagged / fixed_by_author**: distinct findings the bot posted, and those the bot's own
  re-check at the merged head no longer finds (the offline resolution rate);
- **blockers_at_merge**: when the bot's standing review is a request for changes at the merge,
  the blocker findings it posted that are still there;
- readiness: **readiness_updates** (writes of the readiness check run), **ready_calls** (of them,
  "looks merge-ready"), **readiness_comments** (writes of the sticky comment: posted or edited),
  **readiness_posts** (of them, posts: an edit notifies nobody);
- **crashes**: errors the bot logged (a job that failed, a handler that raised);
- GitHub's budget: **api_calls** (the bot's requests with the installation's token over the pull
  request's whole life) and **api_counted** (of them, those that count against the
  installation's primary rate limit: not refused, not a conditional request answered 304).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..demo.harness import BOT, SLUG
from ..events import ReviewState
from ..guards import BotIdentity
from ..review.core.model import ThreadStatus
from ..review.rounds.decide import thread_status
from ..review.rounds.markers import FindingMarker, ReviewMarker, decode
from ..sandbox import Call, FakeGitHub
from ..sandbox.diff import FileDiff, diff_trees
from ..sandbox.state import Review, ReviewComment
from ..usecases.checks import CheckKind, check_name
from ..usecases.readiness.memory import MARKER as READINESS_MARKER
from .play import Played

__all__ = ["TOTAL_KEYS", "Blocker", "PullReport", "measure", "totals"]

READINESS_CHECK = check_name(CheckKind.READINESS, BotIdentity.from_slug(SLUG))
BLOCK = "REQUEST_CHANGES"


@dataclass(frozen=True, slots=True)
class Blocker:
    rule: str
    path: str
    line: int

    def describe(self) -> str:
        return f"{self.rule} at {self.path}:{self.line}"


@dataclass
class PullReport:
    merge: str
    number: int | None
    title: str
    pushes: int
    rounds: int
    comments_per_round: list[int]
    comments: int
    reposted: int
    outside_diff: int
    blocks_raised: int
    blocks_dismissed: int
    resolved_verified: int
    flagged: int
    fixed_by_author: int
    blockers_at_merge: list[Blocker]
    readiness_updates: int
    ready_calls: int
    readiness_comments: int
    readiness_posts: int
    crashes: int
    api_calls: int
    api_counted: int
    seconds: float
    findings: list[str] = field(default_factory=list)  # each flagged finding, and whether it stood at merge
    crash_messages: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["blockers_at_merge"] = [b.describe() for b in self.blockers_at_merge]
        data["seconds"] = round(self.seconds, 2)
        return data


# The integer totals (``--format json``'s ``totals``), summed over the pull requests.
TOTAL_KEYS = (
    "rounds",
    "comments",
    "reposted",
    "outside_diff",
    "blocks_raised",
    "blocks_dismissed",
    "resolved_verified",
    "flagged",
    "fixed_by_author",
    "blockers_at_merge",
    "readiness_updates",
    "ready_calls",
    "readiness_comments",
    "readiness_posts",
    "crashes",
    "api_calls",
    "api_counted",
)


def totals(reports: Sequence[PullReport]) -> dict[str, Any]:
    out: dict[str, Any] = {"prs": len(reports), "pushes": sum(r.pushes for r in reports)}
    for key in TOTAL_KEYS:
        out[key] = sum(len(v) if isinstance(v := getattr(r, key), list) else int(v) for r in reports)
    prs = max(1, len(reports))
    out["resolution_rate"] = round(out["fixed_by_author"] / out["flagged"], 3) if out["flagged"] else None
    out["comments_per_pr"] = round(out["comments"] / prs, 2)
    out["readiness_comments_per_pr"] = round(out["readiness_comments"] / prs, 2)
    out["api_counted_per_pr"] = round(out["api_counted"] / prs, 1)
    out["seconds"] = round(sum(r.seconds for r in reports), 1)
    return out


# ------------------------------------------------------------------------------ the bot's requests
def _ok(call: Call) -> bool:
    return call.auth == "token" and 200 <= call.status < 300


def _id_after(path: str, prefix: str) -> int | None:
    match = re.fullmatch(re.escape(prefix) + r"(\d+)", path)
    return int(match[1]) if match else None


def _posted_review_ids(calls: Iterable[Call], reviews_path: str) -> list[int]:
    return [
        int(c.response["id"])
        for c in calls
        if _ok(c) and c.method == "POST" and c.path.lower() == reviews_path and isinstance(c.response, dict)
    ]


def _thread_change(call: Call) -> tuple[str, bool] | None:
    """(thread node id, resolved) for a resolve or unresolve mutation the fake answered."""
    if call.path != "/graphql" or not _ok(call) or not call.is_graphql_mutation or call.variables is None:
        return None
    document = call.graphql or ""
    thread = call.variables.get("threadId")
    if not isinstance(thread, str):
        return None
    if "unresolveReviewThread" in document:
        return thread, False
    if "resolveReviewThread" in document:
        return thread, True
    return None


# ------------------------------------------------------------------------------ the measures
def _roots(fake: FakeGitHub, review_id: int) -> list[ReviewComment]:
    comments = fake.world.review_comments
    return [
        comments[i] for i in fake.world.reviews[review_id].comment_ids if comments[i].in_reply_to_id is None
    ]


def _identities(fake: FakeGitHub, root: ReviewComment, markers: Sequence[FindingMarker]) -> set[object]:
    """What makes two comments the same finding, for each finding the comment holds (a line's,
    or one problem's places): its fingerprint, and for those on the comment's line, its rule with
    the text of that line (which survives the line moving to another file)."""
    found: set[object] = {m.fingerprint for m in markers}
    commit = fake.world.repo(root.repo).commits.get(root.original_commit_id)
    lines = commit.files.get(root.path, "").split("\n") if commit else []
    if root.original_line is not None and 0 < root.original_line <= len(lines):
        text = " ".join(lines[root.original_line - 1].split())
        # the lead (its marker last) sits on that line; of the others, those recorded there
        here = [m for m in markers[:-1] if (m.path, m.line) == (root.path, root.original_line)]
        found |= {(m.rule, text) for m in [*here, markers[-1]] if text}
    return found


def reposted(fake: FakeGitHub, calls: Sequence[Call], reviews_path: str) -> int:
    """Inline comments posted for a finding a bot thread of an earlier review held, still open."""
    open_threads: dict[str, set[object]] = {}  # thread node id -> the identities of its finding
    count = 0
    for call in calls:
        change = _thread_change(call)
        if change is not None:
            thread, resolved = change
            root = fake.world.review_comments[fake.world.threads[thread].comment_ids[0]]
            markers = FindingMarker.read_all(root.body)
            open_threads.pop(thread, None)
            if not resolved and markers and root.user == BOT:
                open_threads[thread] = _identities(fake, root, markers)
            continue
        for review_id in _posted_review_ids([call], reviews_path):
            held = set().union(*open_threads.values())
            for root in _roots(fake, review_id):
                markers = FindingMarker.read_all(root.body)
                if markers:
                    identities = _identities(fake, root, markers)
                    count += bool(identities & held)
                    open_threads[root.thread_id] = identities
    return count


def in_diff(diff: Sequence[FileDiff], comment: ReviewComment) -> bool:
    """Whether the comment sits on a line the PR adds or changes (or on a changed file)."""
    entry = next((f for f in diff if f.filename == comment.path), None)
    if entry is None:
        return False
    if comment.subject_type == "file" or comment.original_line is None:
        return True
    kind, side = ("-", "old") if comment.side == "LEFT" else ("+", "new")
    return any(
        line.kind == kind and getattr(line, side) == comment.original_line
        for hunk in entry.hunks
        for line in hunk.lines
    )


def _readiness_writes(
    fake: FakeGitHub, calls: Sequence[Call], repo: str, number: int
) -> tuple[int, int, int, int]:
    """(check run writes, of them "looks ready", sticky comment writes, of them posts) for the PR.
    A post notifies the people on the pull request; an edit of the sticky comment does not."""
    updates = ready = comments = posts = 0
    runs_path = f"/repos/{repo}/check-runs"
    for call in calls:
        if not _ok(call) or not isinstance(call.body, dict):
            continue
        path = call.path.lower()
        run_id = _id_after(path, runs_path + "/")
        if (path == runs_path and call.body.get("name") == READINESS_CHECK) or (
            run_id is not None and fake.world.check_runs[run_id].name == READINESS_CHECK
        ):
            updates += 1
            ready += call.body.get("conclusion") == "success"
            continue
        comment_id = _id_after(path, f"/repos/{repo}/issues/comments/")
        posted_here = path == f"/repos/{repo}/issues/{number}/comments" and call.method == "POST"
        edited_here = comment_id is not None and fake.world.issue_comments[comment_id].number == number
        if (posted_here or edited_here) and decode(str(call.body.get("body")), READINESS_MARKER) is not None:
            comments += 1
            posts += posted_here
    return updates, ready, comments, posts


def _verdict(review: Review) -> str | None:
    marker = ReviewMarker.read(review.body)
    return marker.verdict if marker else None


def measure(fake: FakeGitHub, played: Played) -> PullReport:
    world = fake.world
    repo = played.repo.lower()
    calls = fake.calls[played.calls]
    reviews_path = f"/repos/{repo}/pulls/{played.number}/reviews"
    rounds = [
        world.reviews[i]
        for i in _posted_review_ids(calls, reviews_path)
        if ReviewMarker.read(world.reviews[i].body)
    ]
    diffs: dict[str, list[FileDiff]] = {}
    commits = world.repo(repo).commits
    outside = 0
    flagged: dict[str, FindingMarker] = {}
    flagged_at: dict[str, str] = {}  # fingerprint -> the head its finding was flagged at
    per_round: list[int] = []
    for review in rounds:
        roots = _roots(fake, review.id)
        per_round.append(len(roots))
        base = played.bases[review.commit_id]
        diff = diffs.setdefault(
            review.commit_id, diff_trees(commits[base].files, commits[review.commit_id].files)
        )
        outside += sum(not in_diff(diff, c) for c in roots)
        for marker in [
            *FindingMarker.read_all(review.body),
            *(m for c in roots for m in FindingMarker.read_all(c.body)),
        ]:
            flagged.setdefault(marker.fingerprint, marker)
            flagged_at.setdefault(marker.fingerprint, review.commit_id)
    final = played.final
    last = played.pull.pushes[-1].sha
    renamed: dict[str, dict[str, str]] = {}  # head -> the renames from it to the merged head

    def renames_since(head: str) -> dict[str, str]:
        if head not in renamed:
            changed = diff_trees(commits[head].files, commits[last].files) if head in commits else []
            renamed[head] = {f.previous_filename: f.filename for f in changed if f.previous_filename}
        return renamed[head]

    status = {
        fp: thread_status(m, final, renames_since(flagged_at[fp])) if final else ThreadStatus.CANNOT_TELL
        for fp, m in flagged.items()
    }
    blocking = bool(rounds) and _verdict(rounds[-1]) == BLOCK and rounds[-1].state != ReviewState.DISMISSED
    blockers = [
        Blocker(m.rule, m.path, m.line)
        for fp, m in flagged.items()
        if blocking and m.severity == "blocker" and status[fp] is not ThreadStatus.FIXED
    ]
    pull = world.pull(world.repo(repo), played.number)
    threads = [t for t in world.threads_of(pull) if world.review_comments[t.comment_ids[0]].user == BOT]
    updates, ready, sticky, posts = _readiness_writes(fake, calls, repo, played.number)
    return PullReport(
        merge=played.pull.merge_sha,
        number=played.pull.number,
        title=played.pull.title,
        pushes=len(played.pull.pushes),
        rounds=len(rounds),
        comments_per_round=per_round,
        comments=sum(per_round),
        reposted=reposted(fake, calls, reviews_path),
        outside_diff=outside,
        blocks_raised=sum(_verdict(r) == BLOCK for r in rounds),
        blocks_dismissed=sum(r.state == ReviewState.DISMISSED for r in rounds),
        resolved_verified=sum(t.is_resolved and t.resolved_by == BOT for t in threads),
        flagged=len(flagged),
        fixed_by_author=sum(s is ThreadStatus.FIXED for s in status.values()),
        blockers_at_merge=blockers,
        readiness_updates=updates,
        ready_calls=ready,
        readiness_comments=sticky,
        readiness_posts=posts,
        crashes=max(len(played.errors), played.failed_jobs),
        api_calls=sum(c.auth == "token" for c in calls),
        api_counted=sum(c.auth == "token" and c.counted for c in calls),
        seconds=played.seconds,
        findings=[f"{m.rule} at {m.path}:{m.line}: {status[fp]} at merge" for fp, m in flagged.items()],
        crash_messages=played.errors or [f"{played.failed_jobs} job(s) failed"] * bool(played.failed_jobs),
    )
