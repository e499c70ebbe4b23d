"""A pull request's state in one GraphQL request (``PULL_STATE_QUERY``), in REST's shape.

A review and a readiness look used to read the pull request, its reviews, its conversation, its
review threads, the head's check runs and statuses and the bot's settings file in a REST call
each; this is one request, and a follow-up only for a connection past its first 100 (REST's own
listings then, which page). What it returns has the shape of the REST answers the decisions were
built on, so they decide exactly as before. The differences that bite, translated here:

- GraphQL names an App's account by its slug (``Bot``, ``revbot``); REST by ``revbot[bot]``.
- Enums are upper case (``OPEN``, ``COMPLETED``, ``SUCCESS``); REST's states are lower case, but
  a review's ``state`` is upper case in both (only webhooks spell it in lower case).
- ``mergeable`` is ``UNKNOWN`` while GitHub computes it (REST: ``null``), and the read starts it.
- A settings file or an owner's ``.github`` repository that is absent is null, with a
  ``NOT_FOUND`` error beside the data; statuses or check runs the App may not read are
  ``FORBIDDEN`` (REST: 403).
  gidgethub raises ``QueryError`` on any error: those two are answers, anything else is raised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gidgethub

from . import calls as github
from .calls import DecisionAndThreads, ReviewThread
from .client import GitHubClient
from .graphql import PULL_STATE_QUERY

Json = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Settings:
    """The bot's settings file at the default branch: where it came from and its text."""

    source: str | None  # the repository it was read from, None when neither has one
    text: str | None


@dataclass(frozen=True, slots=True)
class PullState:
    """One read of a pull request, each part as the REST listing of it would be."""

    pull: dict[str, Any]
    reviews: tuple[dict[str, Any], ...]  # oldest first
    comments: tuple[dict[str, Any], ...]  # the conversation, oldest first
    # The latest check run of each name on the head, every App's, and the head's statuses;
    # None: the App may not read them (FORBIDDEN, REST's 403).
    runs: tuple[dict[str, Any], ...] | None
    statuses: tuple[dict[str, Any], ...] | None
    review_state: DecisionAndThreads
    settings: Settings


def _login(actor: Json | None) -> dict[str, Any]:
    """A GraphQL ``Actor`` as REST's ``user``: an App's ``Bot`` gets its ``[bot]`` back."""
    if not actor:
        return {"login": None, "type": None}
    kind, login = actor.get("__typename"), str(actor.get("login") or "")
    if kind == "Bot" and not login.endswith("[bot]"):
        login += "[bot]"
    return {"login": login, "type": "Bot" if kind == "Bot" else "User"}


_MERGEABLE = {"MERGEABLE": True, "CONFLICTING": False}


def pull_of(node: Json) -> dict[str, Any]:
    """The fields of REST's pull request that the review and readiness read."""
    people, teams = [], []
    for request in (node.get("reviewRequests") or {}).get("nodes") or []:
        reviewer = (request or {}).get("requestedReviewer") or {}
        if reviewer.get("__typename") == "Team":
            teams.append({"slug": reviewer.get("slug")})
        elif reviewer:
            people.append(_login(reviewer))
    state = str(node.get("state") or "").lower()
    return {
        "number": node.get("number"),
        "state": "closed" if state == "merged" else state,
        "merged": bool(node.get("merged")),
        "draft": bool(node.get("isDraft")),
        "title": node.get("title"),
        "body": node.get("body") or None,
        "html_url": node.get("url"),
        "created_at": node.get("createdAt"),
        "updated_at": node.get("updatedAt"),
        "user": _login(node.get("author")),
        "head": {"sha": node.get("headRefOid")},
        "base": {"sha": node.get("baseRefOid"), "ref": node.get("baseRefName")},
        "mergeable": _MERGEABLE.get(str(node.get("mergeable"))),
        "mergeable_state": str(node.get("mergeStateStatus") or "unknown").lower(),
        "labels": [{"name": label.get("name")} for label in (node.get("labels") or {}).get("nodes") or []],
        "requested_reviewers": people,
        "requested_teams": teams,
    }


def review_of(node: Json) -> dict[str, Any]:
    return {
        "id": node.get("databaseId"),
        "state": node.get("state"),
        "body": node.get("body"),
        "submitted_at": node.get("submittedAt"),
        "commit_id": (node.get("commit") or {}).get("oid"),
        "user": _login(node.get("author")),
    }


def comment_of(node: Json) -> dict[str, Any]:
    return {
        "id": node.get("databaseId"),
        "body": node.get("body"),
        "created_at": node.get("createdAt"),
        "updated_at": node.get("updatedAt"),
        "user": _login(node.get("author")),
    }


def _lower(value: Any) -> str | None:
    return str(value).lower() if value else None


def runs_of(suites: Sequence[Json]) -> list[dict[str, Any]]:
    """Each suite's latest runs, newest first as REST lists them, with their App."""
    runs = [
        {
            "id": run.get("databaseId"),
            "name": run.get("name"),
            "status": _lower(run.get("status")),
            "conclusion": _lower(run.get("conclusion")),
            "started_at": run.get("startedAt"),
            "completed_at": run.get("completedAt"),
            "output": {"title": run.get("title"), "summary": run.get("summary"), "text": run.get("text")},
            "app": {"slug": app.get("slug"), "id": app.get("databaseId")},
        }
        for suite in suites
        for app in [suite.get("app") or {}]
        for run in (suite.get("checkRuns") or {}).get("nodes") or []
    ]
    return sorted(runs, key=lambda r: int(r["id"] or 0), reverse=True)


def statuses_of(status: Json | None) -> list[dict[str, Any]]:
    """The latest status of each context (a status is never edited: created is updated)."""
    return [
        {
            "context": c.get("context"),
            "state": _lower(c.get("state")),
            "created_at": c.get("createdAt"),
            "updated_at": c.get("createdAt"),
        }
        for c in (status or {}).get("contexts") or []
    ]


def _answered(exc: gidgethub.QueryError) -> tuple[Json, set[str]]:
    """The data beside errors that are answers (an absent ``defaults`` repository; the head's
    ``status`` or ``checkSuites`` not readable), and which of those two were refused. Any other
    error is raised again."""
    response = exc.response if isinstance(exc.response, Mapping) else {}
    refused: set[str] = set()
    for error in response.get("errors") or []:
        path = [str(p) for p in error.get("path") or []]
        if error.get("type") == "NOT_FOUND" and path[:1] == ["defaults"]:
            continue
        if error.get("type") == "FORBIDDEN" and path[-1:] in (["status"], ["checkSuites"]):
            refused.add(path[-1])
            continue
        raise exc
    data = response.get("data")
    if not isinstance(data, Mapping):
        raise exc
    return data, refused


def _has_more(connection: Json | None) -> bool:
    return bool(((connection or {}).get("pageInfo") or {}).get("hasNextPage"))


async def read_pull_state(gh: GitHubClient, *, repo: str, pr_number: int, settings_path: str) -> PullState:
    """The pull request and everything about it that the bot decides from, in one request
    (more only where a connection has more than 100: those are listed in full through REST)."""
    owner, name = repo.partition("/")[::2]
    variables = {"owner": owner, "name": name, "number": pr_number, "settings": f"HEAD:{settings_path}"}
    refused: set[str] = set()
    try:
        data = await gh.query(PULL_STATE_QUERY, variables)
    except gidgethub.QueryError as exc:
        data, refused = _answered(exc)
    repository = data.get("repository") or {}
    node = repository.get("pullRequest") or {}
    pull = pull_of(node)
    reviews, comments = node.get("reviews") or {}, node.get("comments") or {}
    commit = (((node.get("commits") or {}).get("nodes") or [{}])[-1] or {}).get("commit") or {}
    suites = commit.get("checkSuites") or {}
    head = str(pull["head"]["sha"])
    return PullState(
        pull=pull,
        reviews=tuple(
            await github.list_reviews(gh, repo=repo, pr_number=pr_number)
            if _has_more(reviews)
            else [review_of(r) for r in reviews.get("nodes") or []]
        ),
        comments=tuple(
            await github.list_issue_comments(gh, repo=repo, number=pr_number)
            if _has_more(comments)
            else [comment_of(c) for c in comments.get("nodes") or []]
        ),
        runs=None
        if "checkSuites" in refused
        else tuple(
            await github.list_check_runs(gh, repo=repo, ref=head)
            if _has_more(suites)
            or any(_has_more((s or {}).get("checkRuns")) for s in suites.get("nodes") or [])
            else runs_of(suites.get("nodes") or [])
        ),
        statuses=None if "status" in refused else tuple(statuses_of(commit.get("status"))),
        review_state=await _review_state(gh, node, repo=repo, pr_number=pr_number),
        settings=_settings(repo, owner, repository, data.get("defaults")),
    )


async def _review_state(gh: GitHubClient, node: Json, *, repo: str, pr_number: int) -> DecisionAndThreads:
    """``reviewDecision`` and every thread: the first page here, the others paged after it."""
    threads: list[ReviewThread] = list(github.threads_of(node))
    page = (node.get("reviewThreads") or {}).get("pageInfo") or {}
    if page.get("hasNextPage"):
        async for thread in github.iter_review_threads(
            gh, repo=repo, pr_number=pr_number, after=page.get("endCursor")
        ):
            threads.append(thread)
    return DecisionAndThreads(node.get("reviewDecision"), tuple(threads))


def _settings(repo: str, owner: str, repository: Json, defaults: Json | None) -> Settings:
    """The repository's file, else the owner's ``.github`` repository's (as Probot reads it)."""
    for source, found in ((repo, repository), (f"{owner}/.github", defaults)):
        blob = (found or {}).get("object") or {}
        if isinstance(blob.get("text"), str) and not blob.get("isTruncated"):
            return Settings(source, blob["text"])
    return Settings(None, None)
