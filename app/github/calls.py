"""Every call an installation makes, one function each, keyword-only after ``gh``. It knows
HTTP, pagination and GitHub's answer shapes; it knows no business rules.

The client they are made with is ``client.GitHubClient`` (the serving bot's is
``installation.InstallationClient``: the installation's token, paced); the App's own calls (JWT)
are ``app.py``; what a failed call means is ``errors.py``; the GraphQL documents are
``graphql.py``.

The budget (5,000 requests an hour an installation, content creation capped per minute) is
the bot's ceiling, so what a review or a readiness look decides from is read in one GraphQL
request (``pullstate.read_pull_state``: the pull request, reviews, conversation, threads, the
head's check runs and statuses, the settings file). REST stays where GraphQL has no equivalent
or answers differently (its reads conditional, ``cache.py``: a 304 is free):

- a pull request's files with their patches (GraphQL's ``files`` has no ``patch``), and a
  commit's tree in one recursive read (GraphQL's ``Tree`` is one level a request);
- the writes (a review with its inline comments, a dismissal, a reply, a reaction, a check
  run, a requested reviewer's removal): each is one request in either API (GraphQL's mutations,
  ``addPullRequestReview``, ``createCheckRun``..., want node ids first), so nothing is saved;
- the base branch's rules and protection summary (``list_branch_rules``, ``get_branch``): the
  readiness decisions are built on REST's summary, whose strictness is unknown to non-admins,
  and on 403/404 meaning unknown; the reactions on a pull request (GraphQL's ``Reaction``
  names its ``user``, a ``User``, where readiness must tell another App's 👀);
- a connection past its first 100 (reviews, comments, check runs), listed through REST.
"""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import gidgethub
import gidgethub.aiohttp

from .client import GitHubClient
from .graphql import READINESS_QUERY, RESOLVE_THREAD, THREADS_QUERY, blobs_query

_SHA = re.compile(r"[0-9a-f]{40}")


# ---------------------------------------------------------------------------------------------
# The REST and GraphQL calls the use cases make, one function each, keyword-only after ``gh``.
# ---------------------------------------------------------------------------------------------
PER_PAGE = 100
BLOB_BATCH = 50  # aliases per GraphQL query: well under GitHub's node and complexity limits


def _split(repo: str) -> tuple[str, str]:
    owner, _, name = repo.partition("/")
    return owner, name


async def get_pull(gh: GitHubClient, *, repo: str, pr_number: int) -> dict[str, Any]:
    data: dict[str, Any] = await gh.getitem(f"/repos/{repo}/pulls/{pr_number}")
    return data


async def list_open_pulls(gh: GitHubClient, *, repo: str) -> list[dict[str, Any]]:
    """The repository's open pull requests, newest first (the first 100: a commit's are there)."""
    data: list[dict[str, Any]] = await gh.getitem(f"/repos/{repo}/pulls?state=open&per_page={PER_PAGE}")
    return data


async def list_pull_files(gh: GitHubClient, *, repo: str, pr_number: int) -> list[dict[str, Any]]:
    """Every changed file (GitHub pages them 100 at a time and stops at 3000)."""
    return [f async for f in gh.getiter(f"/repos/{repo}/pulls/{pr_number}/files?per_page={PER_PAGE}")]


def is_commit_sha(value: str) -> bool:
    return bool(_SHA.fullmatch(value))


async def compare_commits(gh: GitHubClient, *, repo: str, base: str, head: str) -> dict[str, Any] | None:
    """``GET /compare/{base}...{head}`` of two commit shas: ``status`` (identical, ahead, behind,
    diverged) and the files ``head`` changed since their merge base (GitHub lists at most 300).
    None when GitHub knows either commit no more (a force-push left it unreachable)."""
    if not (is_commit_sha(base) and is_commit_sha(head)):
        raise ValueError("compare_commits takes two full commit shas")
    try:
        data = await gh.getitem(f"/repos/{repo}/compare/{base}...{head}?per_page=1")
    except gidgethub.BadRequest as exc:
        if int(exc.status_code) in (404, 422):
            return None
        raise
    return dict(data)


async def list_reviews(gh: GitHubClient, *, repo: str, pr_number: int) -> list[dict[str, Any]]:
    """Every review, oldest first (GitHub's default page is 30; a bot's review can sit on page 2+)."""
    return [r async for r in gh.getiter(f"/repos/{repo}/pulls/{pr_number}/reviews?per_page={PER_PAGE}")]


async def create_review(
    gh: GitHubClient, *, repo: str, pr_number: int, payload: dict[str, Any]
) -> dict[str, Any]:
    data: dict[str, Any] = await gh.post(f"/repos/{repo}/pulls/{pr_number}/reviews", data=payload)
    return data


async def list_issue_comments(gh: GitHubClient, *, repo: str, number: int) -> list[dict[str, Any]]:
    return [c async for c in gh.getiter(f"/repos/{repo}/issues/{number}/comments?per_page={PER_PAGE}")]


async def create_issue_comment(gh: GitHubClient, *, repo: str, number: int, body: str) -> dict[str, Any]:
    data: dict[str, Any] = await gh.post(f"/repos/{repo}/issues/{number}/comments", data={"body": body})
    return data


async def reply_to_review_comment(
    gh: GitHubClient, *, repo: str, pr_number: int, comment_id: int, body: str
) -> dict[str, Any]:
    data: dict[str, Any] = await gh.post(
        f"/repos/{repo}/pulls/{pr_number}/comments/{comment_id}/replies", data={"body": body}
    )
    return data


async def react(gh: GitHubClient, *, repo: str, target: str, target_id: int, content: str) -> None:
    """Add a reaction to a PR (``target="pull"``), a conversation comment (``"issue_comment"``) or an
    inline review comment (``"review_comment"``). GitHub answers 200 when it already exists."""
    paths = {
        "pull": f"/repos/{repo}/issues/{target_id}/reactions",
        "issue_comment": f"/repos/{repo}/issues/comments/{target_id}/reactions",
        "review_comment": f"/repos/{repo}/pulls/comments/{target_id}/reactions",
    }
    await gh.post(paths[target], data={"content": content})


async def list_review_comment_reactions(
    gh: GitHubClient, *, repo: str, comment_id: int, content: str
) -> list[dict[str, Any]]:
    """Who reacted with ``content`` (e.g. ``-1``) on an inline review comment. GitHub sends no
    webhook for reactions: they are read when the bot looks at its threads."""
    url = f"/repos/{repo}/pulls/comments/{comment_id}/reactions?content={quote(content)}&per_page={PER_PAGE}"
    return [r async for r in gh.getiter(url)]


async def get_permission(gh: GitHubClient, *, repo: str, login: str) -> str:
    """Someone's role on the repository, re-read from GitHub (``role_name``: admin, maintain,
    write, triage, read; ``none`` when GitHub does not know them as a collaborator)."""
    try:
        data = await gh.getitem(f"/repos/{repo}/collaborators/{quote(login, safe='')}/permission")
    except gidgethub.BadRequest as exc:
        if int(exc.status_code) == 404:
            return "none"
        raise
    return str(data.get("role_name") or data.get("permission") or "none")


async def get_file_text(gh: GitHubClient, *, repo: str, path: str) -> str | None:
    """A file on the default branch through the contents API; None if it does not exist."""
    try:
        data = await gh.getitem(f"/repos/{repo}/contents/{quote(path)}")
    except gidgethub.BadRequest as exc:
        if int(exc.status_code) == 404:
            return None
        raise
    if not isinstance(data, dict) or data.get("type") != "file" or data.get("encoding") != "base64":
        return None
    return base64.b64decode(str(data.get("content", ""))).decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class Blob:
    text: str | None
    size: int
    is_binary: bool


async def read_blobs(
    gh: GitHubClient, *, repo: str, ref: str, paths: Sequence[str]
) -> dict[str, Blob | None]:
    """File contents at ``ref`` in batches of GraphQL aliases: one request per 50 files, not one per file."""
    owner, name = _split(repo)
    found: dict[str, Blob | None] = {}
    unique = list(dict.fromkeys(paths))
    for start in range(0, len(unique), BLOB_BATCH):
        batch = unique[start : start + BLOB_BATCH]
        variables: dict[str, Any] = {"owner": owner, "name": name}
        variables.update({f"e{i}": f"{ref}:{path}" for i, path in enumerate(batch)})
        data = await gh.query(blobs_query(len(batch)), variables)
        repository = (data or {}).get("repository") or {}
        for i, path in enumerate(batch):
            node = repository.get(f"f{i}")
            if not node or "byteSize" not in node:
                found[path] = None
                continue
            binary = bool(node.get("isBinary"))
            text = None if binary or node.get("isTruncated") else node.get("text")
            found[path] = Blob(text=text, size=int(node.get("byteSize") or 0), is_binary=binary)
    return found


@dataclass(frozen=True, slots=True)
class Tree:
    blobs: tuple[str, ...]  # regular and executable files
    symlinks: tuple[str, ...]
    truncated: bool


async def read_tree(gh: GitHubClient, *, repo: str, sha: str) -> Tree:
    """Every path at commit ``sha`` in ONE request (``git/trees/{sha}?recursive=1``), however many
    files the pull request changes. GitHub cuts very large trees short (``truncated``)."""
    data = await gh.getitem(f"/repos/{repo}/git/trees/{quote(sha)}?recursive=1")
    entries = data.get("tree") if isinstance(data, dict) else None
    blobs: list[str] = []
    symlinks: list[str] = []
    for entry in entries if isinstance(entries, list) else []:
        if (
            not isinstance(entry, dict)
            or entry.get("type") != "blob"
            or not isinstance(entry.get("path"), str)
        ):
            continue
        (symlinks if entry.get("mode") == "120000" else blobs).append(entry["path"])
    return Tree(tuple(blobs), tuple(symlinks), bool(isinstance(data, dict) and data.get("truncated")))


async def find_check_run(
    gh: GitHubClient, *, repo: str, head_sha: str, name: str, app_id: int
) -> dict[str, Any] | None:
    """The latest check run of this App (``app_id``) by ``name`` on the commit: another App's run
    of the same name is not ours to update (GitHub answers 403)."""
    query = f"check_name={quote(name)}&app_id={app_id}&filter=latest&per_page={PER_PAGE}"
    data = await gh.getitem(f"/repos/{repo}/commits/{head_sha}/check-runs?{query}")
    runs = data.get("check_runs", []) if isinstance(data, dict) else []
    return runs[0] if runs else None


async def create_check_run(gh: GitHubClient, *, repo: str, payload: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = await gh.post(f"/repos/{repo}/check-runs", data=payload)
    return data


async def update_check_run(
    gh: GitHubClient, *, repo: str, check_run_id: int, payload: dict[str, Any]
) -> dict[str, Any]:
    data: dict[str, Any] = await gh.patch(f"/repos/{repo}/check-runs/{check_run_id}", data=payload)
    return data


async def remove_requested_reviewers(
    gh: GitHubClient, *, repo: str, pr_number: int, reviewers: Sequence[str]
) -> None:
    await gh.delete(
        f"/repos/{repo}/pulls/{pr_number}/requested_reviewers", data={"reviewers": list(reviewers)}
    )


async def list_review_comments(
    gh: GitHubClient, *, repo: str, pr_number: int, review_id: int
) -> list[dict[str, Any]]:
    """The inline comments of one review."""
    url = f"/repos/{repo}/pulls/{pr_number}/reviews/{review_id}/comments?per_page={PER_PAGE}"
    return [c async for c in gh.getiter(url)]


async def dismiss_review(
    gh: GitHubClient, *, repo: str, pr_number: int, review_id: int, message: str
) -> None:
    await gh.put(
        f"/repos/{repo}/pulls/{pr_number}/reviews/{review_id}/dismissals",
        data={"message": message, "event": "DISMISS"},
    )


@dataclass(frozen=True, slots=True)
class ReviewThread:
    node_id: str  # PRRT_..., what resolveReviewThread takes
    is_resolved: bool
    path: str
    line: int | None
    root_comment_id: int
    root_body: str
    root_author_login: str | None
    root_author_type: str | None  # GraphQL __typename: "Bot" for Apps (login without "[bot]")


def _thread(node: Mapping[str, Any]) -> ReviewThread | None:
    roots = (node.get("comments") or {}).get("nodes") or []
    if not roots or roots[0].get("databaseId") is None:
        return None
    root = roots[0]
    author = root.get("author") or {}
    return ReviewThread(
        node_id=str(node["id"]),
        is_resolved=bool(node.get("isResolved")),
        path=str(node.get("path") or ""),
        line=node.get("line"),
        root_comment_id=int(root["databaseId"]),
        root_body=str(root.get("body") or ""),
        root_author_login=author.get("login"),
        root_author_type=author.get("__typename"),
    )


async def _thread_pages(
    gh: GitHubClient, query: str, *, repo: str, pr_number: int, after: str | None = None
) -> AsyncIterator[Mapping[str, Any]]:
    """The ``pullRequest`` object of each page of ``query`` (100 review threads a page), from
    the one after ``after`` (a cursor of an earlier page, as ``PULL_STATE_QUERY`` leaves)."""
    owner, name = _split(repo)
    while True:
        data = await gh.query(query, {"owner": owner, "name": name, "number": pr_number, "after": after})
        pull = ((data or {}).get("repository") or {}).get("pullRequest") or {}
        yield pull
        page = (pull.get("reviewThreads") or {}).get("pageInfo") or {}
        if not page.get("hasNextPage"):
            return
        after = page.get("endCursor")


def threads_of(pull: Mapping[str, Any]) -> Iterator[ReviewThread]:
    for node in (pull.get("reviewThreads") or {}).get("nodes") or []:
        thread = _thread(node)
        if thread is not None:
            yield thread


async def iter_review_threads(
    gh: GitHubClient, *, repo: str, pr_number: int, after: str | None = None
) -> AsyncIterator[ReviewThread]:
    """Every review thread of a PR (after the cursor ``after``), 100 per page, lazily: a caller
    looking for one stops early."""
    async for pull in _thread_pages(gh, THREADS_QUERY, repo=repo, pr_number=pr_number, after=after):
        for thread in threads_of(pull):
            yield thread


async def get_review_comment(gh: GitHubClient, *, repo: str, comment_id: int) -> dict[str, Any]:
    data: dict[str, Any] = await gh.getitem(f"/repos/{repo}/pulls/comments/{comment_id}")
    return data


async def list_pull_review_comments(gh: GitHubClient, *, repo: str, pr_number: int) -> list[dict[str, Any]]:
    """Every inline comment of the PR (roots and replies), oldest first."""
    return [c async for c in gh.getiter(f"/repos/{repo}/pulls/{pr_number}/comments?per_page={PER_PAGE}")]


async def resolve_review_thread(gh: GitHubClient, *, thread_node_id: str) -> bool:
    """Resolve a thread (REST cannot); True when GitHub confirms ``isResolved``."""
    data = await gh.query(RESOLVE_THREAD, {"threadId": thread_node_id})
    thread = ((data or {}).get("resolveReviewThread") or {}).get("thread") or {}
    return bool(thread.get("isResolved"))


# ---------------------------------------------------------------------------------------------
# Readiness: what GitHub says of a pull request's CI, reviews and branch at its head.
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DecisionAndThreads:
    """``reviewDecision`` and every review thread, read in one GraphQL query (one per 100 threads)."""

    review_decision: str | None
    threads: tuple[ReviewThread, ...]


async def read_review_state(gh: GitHubClient, *, repo: str, pr_number: int) -> DecisionAndThreads:
    decision: str | None = None
    threads: list[ReviewThread] = []
    async for pull in _thread_pages(gh, READINESS_QUERY, repo=repo, pr_number=pr_number):
        decision = pull.get("reviewDecision")
        threads.extend(threads_of(pull))
    return DecisionAndThreads(decision, tuple(threads))


async def list_check_runs(gh: GitHubClient, *, repo: str, ref: str) -> list[dict[str, Any]]:
    """The latest check run of each name on ``ref``, of every App (not only ours)."""
    url = f"/repos/{repo}/commits/{quote(ref)}/check-runs?filter=latest&per_page={PER_PAGE}"
    return [r async for r in gh.getiter(url, iterable_key="check_runs")]


async def get_combined_status(gh: GitHubClient, *, repo: str, ref: str) -> dict[str, Any]:
    """The commit statuses on ``ref`` (the latest of each context) and their combined state."""
    data: dict[str, Any] = await gh.getitem(f"/repos/{repo}/commits/{quote(ref)}/status?per_page={PER_PAGE}")
    return data


async def get_branch(gh: GitHubClient, *, repo: str, branch: str) -> dict[str, Any]:
    """A branch, with the summary of its classic protection (required status checks)."""
    data: dict[str, Any] = await gh.getitem(f"/repos/{repo}/branches/{quote(branch, safe='')}")
    return data


async def list_branch_rules(gh: GitHubClient, *, repo: str, branch: str) -> list[dict[str, Any]]:
    """The active ruleset rules for ``branch`` (readable with metadata access)."""
    url = f"/repos/{repo}/rules/branches/{quote(branch, safe='')}?per_page={PER_PAGE}"
    return [r async for r in gh.getiter(url)]


async def list_pull_reactions(gh: GitHubClient, *, repo: str, pr_number: int) -> list[dict[str, Any]]:
    """Reactions on the pull request itself (its issue), e.g. a reviewer bot's 👀."""
    return [r async for r in gh.getiter(f"/repos/{repo}/issues/{pr_number}/reactions?per_page={PER_PAGE}")]


async def update_issue_comment(gh: GitHubClient, *, repo: str, comment_id: int, body: str) -> dict[str, Any]:
    data: dict[str, Any] = await gh.patch(f"/repos/{repo}/issues/comments/{comment_id}", data={"body": body})
    return data


def is_forbidden(exc: BaseException) -> bool:
    """GitHub refused a read for lack of a permission ("Resource not accessible by integration")."""
    return isinstance(exc, gidgethub.BadRequest) and int(exc.status_code) == 403
