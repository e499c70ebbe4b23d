"""The answer GitHub's GraphQL API gives the bot's ``PullState`` query, built from a recording
table's REST answers (``recording_github``): a test states the pull request, its reviews,
conversation, check runs, statuses and settings file as the REST listings it knows, and the one
request that reads them all answers the same, in GraphQL's spelling (``Bot`` logins without
``[bot]``, upper-case enums, errors beside the data for what is absent or refused)."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

NO_MORE = {"hasNextPage": False, "endCursor": None}
MERGEABLE = {True: "MERGEABLE", False: "CONFLICTING", None: "UNKNOWN"}


def _actor(user: Mapping[str, Any]) -> dict[str, Any]:
    login = str(user["login"])
    bot = login.endswith("[bot]") or user.get("type") == "Bot"
    return {"__typename": "Bot" if bot else "User", "login": login.removesuffix("[bot]")}


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def _contexts(statuses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"context": status["context"], "state": status["state"].upper(), "createdAt": status["created_at"]}
        for status in statuses
    ]


def _suites(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One suite per run (each its App's), as GitHub's ``checkSuites`` holds them."""
    return [
        {
            "app": {"slug": (r.get("app") or {}).get("slug"), "databaseId": (r.get("app") or {}).get("id")},
            "checkRuns": {
                "pageInfo": NO_MORE,
                "nodes": [
                    {
                        "databaseId": r.get("id"),
                        "name": r["name"],
                        "status": _upper(r.get("status")),
                        "conclusion": _upper(r.get("conclusion")),
                        "startedAt": r.get("started_at"),
                        "completedAt": r.get("completed_at"),
                        **{k: (r.get("output") or {}).get(k) for k in ("title", "summary", "text")},
                    }
                ],
            },
        }
        for r in runs
    ]


def _review(r: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "databaseId": r.get("id"),
        "state": r["state"],
        "body": r.get("body") or "",
        "submittedAt": r.get("submitted_at"),
        "commit": {"oid": r.get("commit_id")},
        "author": _actor(r["user"]),
    }


def _comment(c: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "databaseId": c["id"],
        "body": c["body"],
        "createdAt": c.get("created_at"),
        "updatedAt": c.get("updated_at"),
        "author": _actor(c["user"]),
    }


def _pull(pull: Mapping[str, Any]) -> dict[str, Any]:
    state = "merged" if pull.get("merged") else str(pull.get("state") or "open")
    return {
        "number": pull["number"],
        "state": state.upper(),
        "merged": bool(pull.get("merged")),
        "isDraft": bool(pull.get("draft")),
        "title": pull.get("title") or "",
        "body": pull.get("body") or "",
        "url": pull.get("html_url") or "",
        "createdAt": pull.get("created_at"),
        "updatedAt": pull.get("updated_at"),
        "author": _actor(pull["user"]),
        "headRefOid": pull["head"]["sha"],
        "baseRefOid": (pull.get("base") or {}).get("sha"),
        "baseRefName": (pull.get("base") or {}).get("ref") or "main",
        "mergeable": MERGEABLE[pull.get("mergeable")],
        "mergeStateStatus": str(pull.get("mergeable_state") or "unknown").upper(),
        "reviewDecision": None,
        "labels": {"nodes": [{"name": label["name"]} for label in pull.get("labels") or []]},
        "reviewRequests": {
            "nodes": [{"requestedReviewer": _actor(u)} for u in pull.get("requested_reviewers") or []]
            + [
                {"requestedReviewer": {"__typename": "Team", "slug": t["slug"]}}
                for t in pull.get("requested_teams") or []
            ]
        },
    }


Lookup = Callable[[str, str], tuple[int, Any] | None]


def _listed(answer: Lookup, path: str) -> list[Any]:
    found = answer("GET", path)
    return list(found[1]) if found is not None else []


def pull_state(answer: Lookup, variables: Mapping[str, Any]) -> dict[str, Any]:
    """The whole GraphQL response (``data`` and ``errors``) to ``PULL_STATE_QUERY``; ``answer``
    is the table's REST answer to a GET of a path (None: the table has none)."""
    repo, number = f"{variables['owner']}/{variables['name']}", variables["number"]
    base = f"/repos/{repo}"
    found = answer("GET", f"{base}/pulls/{number}")
    assert found is not None, f"the table has no pull request {number}"
    pull = found[1]
    head = pull["head"]["sha"]
    runs = (answer("GET", f"{base}/commits/{head}/check-runs") or (200, {"check_runs": []}))[1]["check_runs"]
    status_code, status = answer("GET", f"{base}/commits/{head}/status") or (200, {"statuses": []})
    node = {
        **_pull(pull),
        "reviews": {
            "pageInfo": NO_MORE,
            "nodes": [_review(r) for r in _listed(answer, f"{base}/pulls/{number}/reviews")],
        },
        "comments": {
            "pageInfo": NO_MORE,
            "nodes": [_comment(c) for c in _listed(answer, f"{base}/issues/{number}/comments")],
        },
        "reviewThreads": {"pageInfo": NO_MORE, "nodes": []},
        "commits": {
            "nodes": [
                {
                    "commit": {
                        "oid": head,
                        "status": {"contexts": _contexts(status["statuses"])}
                        if status_code == 200 and status["statuses"]
                        else None,
                        "checkSuites": {"pageInfo": NO_MORE, "nodes": _suites(runs)},
                    }
                }
            ]
        },
    }
    errors: list[dict[str, Any]] = []
    path = str(variables["settings"]).partition(":")[2]
    data: dict[str, Any] = {
        "repository": {"object": _blob(answer, f"{base}/contents/{path}"), "pullRequest": node}
    }
    defaults = answer("GET", f"/repos/{variables['owner']}/.github/contents/{path}")
    if defaults is not None and defaults[0] == 200:
        data["defaults"] = {"object": _blob(answer, f"/repos/{variables['owner']}/.github/contents/{path}")}
    else:
        data["defaults"] = None
        errors.append(
            {"type": "NOT_FOUND", "path": ["defaults"], "message": "Could not resolve to a Repository"}
        )
    if status_code == 403:
        where = ["repository", "pullRequest", "commits", "nodes", 0, "commit", "status"]
        errors.append(
            {"type": "FORBIDDEN", "path": where, "message": "Resource not accessible by integration"}
        )
    return {"data": data, "errors": errors} if errors else data


def _blob(answer: Lookup, path: str) -> dict[str, Any] | None:
    found = answer("GET", path)
    if found is None or found[0] != 200:
        return None
    return {"text": base64.b64decode(found[1]["content"]).decode(), "isTruncated": False}
