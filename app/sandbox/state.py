"""The fake's world: plain dataclasses and one container, no HTTP and no JSON shapes.

Everything GitHub would keep in its database lives in ``World``: users, installations,
repositories with their commit snapshots and branches, pull requests, reviews, review comments
and their threads, issue comments, reactions and check runs. Ids come from one counter so no two
objects of any kind share an id, which keeps test failures unambiguous.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime


def iso(epoch: float | None = None) -> str:
    """GitHub's timestamp format: ``2024-01-02T03:04:05Z``."""
    moment = datetime.fromtimestamp(time.time() if epoch is None else epoch, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def node_id(prefix: str, key: str | int) -> str:
    """A GraphQL global id in GitHub's current style (``PRRT_kwDO...``)."""
    raw = base64.urlsafe_b64encode(f"fake:{prefix}:{key}".encode()).decode().rstrip("=")
    return f"{prefix}_kwDO{raw}"


def blob_sha(content: str) -> str:
    """The git blob id of a file's content, as ``git hash-object`` computes it."""
    data = content.encode("utf-8")
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


class NotFound(LookupError):
    """A lookup for something the world does not hold."""


@dataclass
class User:
    login: str
    id: int
    type: str  # "User" | "Bot" | "Organization"
    node_id: str
    name: str | None = None


@dataclass
class Installation:
    id: int
    account: str
    node_id: str
    created_at: str


@dataclass
class Commit:
    sha: str
    files: dict[str, str]  # the FULL tree at this commit: path -> text
    parent: str | None
    message: str
    author: str
    timestamp: str


@dataclass
class Repo:
    full_name: str
    id: int
    node_id: str
    installation_id: int
    default_branch: str
    private: bool
    created_at: str
    branches: dict[str, str] = field(default_factory=dict)  # name -> sha
    commits: dict[str, Commit] = field(default_factory=dict)
    dismissal_forbidden: bool = False
    permissions: dict[str, str] = field(default_factory=dict)  # lowercased login -> admin/write/read/none
    associations: dict[str, str] = field(default_factory=dict)  # lowercased login -> OWNER/MEMBER/...
    pushed_at: str = ""
    rules: list[dict[str, object]] = field(default_factory=list)  # the default branch's rules (rulesets)
    # Classic branch protection: branch -> its required status checks (contexts, enforcement level).
    protection: dict[str, dict[str, object]] = field(default_factory=dict)

    @property
    def owner(self) -> str:
        return self.full_name.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.full_name.split("/", 1)[1]

    @property
    def key(self) -> str:
        return self.full_name.lower()


@dataclass
class Pull:
    repo: str  # Repo.key
    number: int
    id: int
    node_id: str
    issue_id: int
    issue_node_id: str
    title: str
    body: str | None
    author: str
    head_ref: str
    base_ref: str
    head_sha: str
    draft: bool
    author_association: str
    created_at: str
    updated_at: str
    state: str = "open"
    merged: bool = False
    requested_reviewers: list[str] = field(default_factory=list)
    requested_teams: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    closed_at: str | None = None
    merged_at: str | None = None
    conflicts: bool = False  # what a test says the merge would do
    mergeable_pending: bool = False  # GitHub has not computed mergeability yet: the next read is null


@dataclass
class Review:
    id: int
    node_id: str
    repo: str
    number: int
    user: str
    body: str
    state: str  # PENDING | COMMENTED | APPROVED | CHANGES_REQUESTED | DISMISSED
    commit_id: str
    submitted_at: str | None
    author_association: str
    comment_ids: list[int] = field(default_factory=list)
    dismissal_message: str | None = None


@dataclass
class ReviewComment:
    id: int
    node_id: str
    repo: str
    number: int
    review_id: int
    thread_id: str
    user: str
    body: str
    path: str
    line: int | None  # None once outdated (or for file-level comments)
    original_line: int | None
    side: str
    start_line: int | None
    original_start_line: int | None
    start_side: str | None
    commit_id: str
    original_commit_id: str
    diff_hunk: str
    position: int | None
    original_position: int
    in_reply_to_id: int | None
    created_at: str
    updated_at: str
    author_association: str
    subject_type: str = "line"


@dataclass
class Thread:
    node_id: str
    repo: str
    number: int
    comment_ids: list[int] = field(default_factory=list)
    is_resolved: bool = False
    resolved_by: str | None = None


@dataclass
class IssueComment:
    id: int
    node_id: str
    repo: str
    number: int
    user: str
    body: str
    created_at: str
    updated_at: str
    author_association: str
    via_app: bool


@dataclass
class Reaction:
    id: int
    node_id: str
    repo: str
    subject: tuple[str, int]  # ("issue", number) | ("issue_comment", id) | ("review_comment", id)
    user: str
    content: str
    created_at: str


@dataclass
class CheckRun:
    id: int
    node_id: str
    repo: str
    name: str
    head_sha: str
    status: str
    conclusion: str | None
    started_at: str
    completed_at: str | None
    title: str | None
    summary: str | None
    text: str | None
    external_id: str
    details_url: str | None
    check_suite_id: int
    annotations: list[dict[str, object]] = field(default_factory=list)
    app: str = ""  # the slug of the App that owns it; "" for the fake's own App


@dataclass
class Status:
    """A commit status (the Statuses API), set by any integration or person."""

    id: int
    node_id: str
    repo: str
    sha: str
    context: str
    state: str  # error | failure | pending | success
    description: str | None
    target_url: str | None
    creator: str
    created_at: str
    updated_at: str


@dataclass
class Token:
    token: str
    installation_id: int
    expires_at: float
    revoked: bool = False


class World:
    """All state, with lookups that raise ``NotFound`` instead of returning None."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock  # epoch seconds of every timestamp the fake writes (tests pass a fake)
        self._ids = itertools.count(1001)
        self._sha_counter = itertools.count(1)
        self.users: dict[str, User] = {}
        self.installations: dict[int, Installation] = {}
        self.repos: dict[str, Repo] = {}
        self.pulls: dict[tuple[str, int], Pull] = {}
        self.next_number: dict[str, int] = {}
        self.reviews: dict[int, Review] = {}
        self.review_comments: dict[int, ReviewComment] = {}
        self.threads: dict[str, Thread] = {}
        self.issue_comments: dict[int, IssueComment] = {}
        self.reactions: list[Reaction] = []
        self.check_runs: dict[int, CheckRun] = {}
        self.check_suites: dict[tuple[str, str, str], int] = {}
        self.statuses: list[Status] = []

    # ---------------------------------------------------------------- allocation
    def iso(self) -> str:
        """Now on the world's clock, in GitHub's timestamp format."""
        return iso(self.clock())

    def new_id(self) -> int:
        return next(self._ids)

    def new_sha(self, seed: str) -> str:
        text = f"{seed}:{next(self._sha_counter)}"
        return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()

    def take_number(self, repo: Repo) -> int:
        number = self.next_number.get(repo.key, 1)
        self.next_number[repo.key] = number + 1
        return number

    # ---------------------------------------------------------------- users
    def user(self, login: str, *, type: str | None = None) -> User:
        """The user with this login, created on first mention (``*[bot]`` logins are Bots)."""
        found = self.users.get(login.lower())
        if found is not None:
            return found
        kind = type or ("Bot" if login.endswith("[bot]") else "User")
        uid = self.new_id()
        prefix = {"Bot": "BOT", "Organization": "O"}.get(kind, "U")
        created = User(login=login, id=uid, type=kind, node_id=node_id(prefix, uid))
        self.users[login.lower()] = created
        return created

    def known_user(self, login: str) -> User | None:
        return self.users.get(login.lower())

    # ---------------------------------------------------------------- repos and commits
    def repo(self, full_name: str) -> Repo:
        found = self.repos.get(full_name.lower())
        if found is None:
            raise NotFound(f"no repository {full_name!r}")
        return found

    def commit(self, repo: Repo, sha: str) -> Commit:
        found = repo.commits.get(sha)
        if found is None:
            raise NotFound(f"no commit {sha} in {repo.full_name}")
        return found

    def resolve_ref(self, repo: Repo, ref: str | None) -> Commit:
        """A branch name, ``refs/heads/x``, a full or abbreviated sha, or ``HEAD``/None (default branch)."""
        if ref is None or ref in ("", "HEAD"):
            ref = repo.default_branch
        name = ref.removeprefix("refs/heads/")
        if name in repo.branches:
            return self.commit(repo, repo.branches[name])
        if ref in repo.commits:
            return repo.commits[ref]
        if len(ref) >= 7:
            matches = [sha for sha in repo.commits if sha.startswith(ref.lower())]
            if len(matches) == 1:
                return repo.commits[matches[0]]
        raise NotFound(f"no commit for ref {ref!r} in {repo.full_name}")

    def ancestors(self, repo: Repo, sha: str | None) -> list[str]:
        """``sha`` and its parents, newest first."""
        chain: list[str] = []
        while sha is not None and sha in repo.commits and sha not in chain:
            chain.append(sha)
            sha = repo.commits[sha].parent
        return chain

    def merge_base(self, repo: Repo, base_sha: str, head_sha: str) -> str:
        """The newest commit that both histories contain (the base tip when they do not meet)."""
        head_line = set(self.ancestors(repo, head_sha))
        for sha in self.ancestors(repo, base_sha):
            if sha in head_line:
                return sha
        return base_sha

    # ---------------------------------------------------------------- pulls and reviews
    def pull(self, repo: Repo, number: int) -> Pull:
        found = self.pulls.get((repo.key, number))
        if found is None:
            raise NotFound(f"no pull request #{number} in {repo.full_name}")
        return found

    def pulls_of(self, repo: Repo) -> list[Pull]:
        return [pull for (key, _), pull in self.pulls.items() if key == repo.key]

    def reviews_of(self, pull: Pull) -> list[Review]:
        return [r for r in self.reviews.values() if r.repo == pull.repo and r.number == pull.number]

    def review_comments_of(self, pull: Pull) -> list[ReviewComment]:
        return [c for c in self.review_comments.values() if c.repo == pull.repo and c.number == pull.number]

    def threads_of(self, pull: Pull) -> list[Thread]:
        return [t for t in self.threads.values() if t.repo == pull.repo and t.number == pull.number]

    def issue_comments_of(self, repo: Repo, number: int) -> list[IssueComment]:
        return [c for c in self.issue_comments.values() if c.repo == repo.key and c.number == number]

    def check_suite_id(self, repo: Repo, head_sha: str, app: str = "") -> int:
        """One suite per App and commit, as on GitHub."""
        key = (repo.key, head_sha, app)
        if key not in self.check_suites:
            self.check_suites[key] = self.new_id()
        return self.check_suites[key]
