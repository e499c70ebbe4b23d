"""GraphQL over the fake's world: graphql-core executing GitHub's schema, cut to what the bot asks.

``schema.graphql`` is GitHub's public schema trimmed to the types, fields and arguments of the
bot's documents (see its header). graphql-core parses, validates and executes every request
against it, so aliases, fragments, variables and ``__typename`` behave as on GitHub and an answer
holds exactly what was asked. The resolvers below read the sandbox's ``World``: an object is a
dict of its field values, and a field that takes arguments is a callable that graphql-core's
default resolver calls with ``info`` and the arguments.

A document that GitHub would accept but that asks for something this schema does not hold is
answered ``unsupported by the fake`` and recorded as a problem, so a test never passes on data
the fake made up. Checking documents against GitHub's *full* schema is the installed
``Validator``'s job (the server runs it first).
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import graphql

from .actions import Actions, Emit
from .ci import CiActions, latest_statuses
from .diff import is_binary
from .state import CheckRun, NotFound, Pull, Repo, ReviewComment, Thread, World, blob_sha, node_id

SCHEMA_PATH = Path(__file__).with_name("schema.graphql")
UNSUPPORTED = "unsupported by the fake"
MAX_PAGE = 100
_CURSOR = "cursor:v2:"

View = dict[str, Any]


@functools.cache
def schema() -> graphql.GraphQLSchema:
    """Built once per process; graphql-core checks it is a valid schema on first validation."""
    return graphql.build_schema(SCHEMA_PATH.read_text(encoding="utf-8"))


class GitHubError(Exception):
    """An error GitHub reports in the answer's ``errors`` with a ``type`` (``NOT_FOUND``...)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class Outcome:
    body: dict[str, Any]
    problems: list[str]


def operation_type(query: str, body: Any = None) -> str | None:
    """``query``/``mutation``/``subscription`` of the operation a request would run, if it parses."""
    try:
        document = graphql.parse(query)
    except graphql.GraphQLError:
        return None
    name = body.get("operationName") if isinstance(body, dict) else None
    operation = graphql.get_operation_ast(document, name if isinstance(name, str) else None)
    return operation.operation.value if operation else None


def _unserved(document: graphql.DocumentNode) -> list[str]:
    """What a document asks that the trimmed schema lacks: ``Type.field`` names where the
    document names a missing field, graphql-core's messages for anything else."""
    errors = graphql.validate(schema(), document)
    if not errors:
        return []
    type_info = graphql.TypeInfo(schema())
    fields: list[str] = []

    class MissingFields(graphql.Visitor):
        def enter_field(self, node: graphql.FieldNode, *_: Any) -> None:
            parent = type_info.get_parent_type()
            if parent is not None and type_info.get_field_def() is None:
                fields.append(f"{parent.name}.{node.name.value}")

    graphql.visit(document, graphql.TypeInfoVisitor(type_info, MissingFields()))
    return fields or [error.message for error in errors]


def _cursor(index: int) -> str:
    return base64.b64encode(f"{_CURSOR}{index}".encode()).decode()


def _after(cursor: str | None) -> int:
    """The index after ``cursor`` (0 without one); a cursor the fake did not issue is an error."""
    if cursor is None:
        return 0
    try:
        text = base64.b64decode(cursor.encode(), validate=True).decode()
    except ValueError:
        text = ""
    position = text.removeprefix(_CURSOR)
    if not text.startswith(_CURSOR) or not position.isdigit():
        raise GitHubError("INVALID_CURSOR_ARGUMENTS", f"`{cursor}` does not appear to be a valid cursor.")
    return int(position) + 1


def _latest(runs: list[CheckRun], filter_by: dict[str, Any] | None) -> list[CheckRun]:
    """The runs a ``CheckRunFilter`` keeps; only ``checkType`` is served (ALL or LATEST)."""
    if filter_by and set(filter_by) - {"checkType"}:
        raise ValueError(f"{UNSUPPORTED}: checkRuns(filterBy: {filter_by!r})")
    if (filter_by or {}).get("checkType") != "LATEST":
        return runs
    latest = {run.name: run for run in runs}  # oldest first: the newest of each name wins
    return sorted(latest.values(), key=lambda r: r.id)


def _page(field: str, items: list[Any], first: int | None, after: str | None = None) -> View:
    """A connection page as GitHub cuts it: ``first`` is required and at most 100."""
    if first is None:
        raise GitHubError(
            "INVALID_ARGUMENTS",
            f"You must provide a `first` or `last` value to properly paginate the `{field}` connection.",
        )
    if not 0 <= first <= MAX_PAGE:
        raise GitHubError(
            "INVALID_ARGUMENTS",
            f"Requesting {first} records on the `{field}` connection exceeds the `first` limit"
            f" of {MAX_PAGE} records.",
        )
    start = _after(after)
    window = items[start : start + first]
    end_cursor = _cursor(start + len(window) - 1) if window else None
    return {
        "nodes": window,
        "pageInfo": {"hasNextPage": start + len(window) < len(items), "endCursor": end_cursor},
    }


class Executor:
    """Runs one GraphQL request for one installation; ``emit`` receives mutation webhooks."""

    def __init__(
        self, world: World, actions: Actions, *, installation_id: int, actor: str, emit: Emit
    ) -> None:
        self.world = world
        self.actions = actions
        self.installation_id = installation_id
        self.actor = actor
        self.emit = emit

    def run(self, query: str, variables: dict[str, Any] | None, operation_name: str | None) -> Outcome:
        try:
            document = graphql.parse(query)
        except graphql.GraphQLError as error:
            return Outcome({"errors": [error.formatted]}, [f"GraphQL syntax: {error.message}"])
        unserved = _unserved(document)
        if unserved:
            errors = [{"message": UNSUPPORTED, "extensions": {"field": f}} for f in unserved]
            return Outcome({"errors": errors}, [f"GraphQL field {f}: {UNSUPPORTED}" for f in unserved])
        root: dict[str, Callable[..., Any]] = {
            "repository": self._repository,
            "resolveReviewThread": self._resolve_thread,
        }
        result = graphql.execute_sync(
            schema(), document, root, variable_values=variables, operation_name=operation_name
        )
        body: dict[str, Any] = {} if result.data is None else {"data": result.data}
        problems: list[str] = []
        if result.errors:
            body["errors"] = [self._error(error, problems) for error in result.errors]
        return Outcome(body, problems)

    @staticmethod
    def _error(error: graphql.GraphQLError, problems: list[str]) -> dict[str, Any]:
        """GitHub's shape for the errors it reports; anything else is the fake's own fault."""
        cause = error.original_error
        if isinstance(cause, GitHubError):
            return {
                "type": cause.kind,
                "path": error.path,
                "locations": error.formatted.get("locations", []),
                "message": error.message,
            }
        problems.append(f"GraphQL: {error.message}")
        return dict(error.formatted)

    # ---------------------------------------------------------------- roots
    def _visible(self, repo: Repo) -> bool:
        return repo.installation_id == self.installation_id

    def _repository(self, _info: object, *, owner: str, name: str) -> View:
        try:
            repo: Repo | None = self.world.repo(f"{owner}/{name}")
        except NotFound:
            repo = None
        if repo is None or not self._visible(repo):
            message = f"Could not resolve to a Repository with the name '{owner}/{name}'."
            raise GitHubError("NOT_FOUND", message)
        return {
            "object": lambda _info, expression=None: self._git_object(repo, expression),
            "pullRequest": lambda _info, number: self._pull_request(repo, number),
        }

    def _resolve_thread(self, _info: object, *, input: dict[str, Any]) -> View:
        thread = self.world.threads.get(input["threadId"])
        if thread is None or not self._visible(self.world.repo(thread.repo)):
            raise GitHubError(
                "NOT_FOUND", f"Could not resolve to a node with the global id of '{input['threadId']}'"
            )
        self.actions.set_thread_resolved(thread, self.actor, True, self.emit)
        return {"thread": self._thread(thread)}

    # ---------------------------------------------------------------- git objects
    def _git_object(self, repo: Repo, expression: str | None) -> View | None:
        """``"REV:path"`` as ``git rev-parse`` reads it: a Blob, a Tree for a directory, else null."""
        rev, colon, path = (expression or "").partition(":")
        if not colon:  # a Commit: the bot never asks for one
            raise ValueError(f"{UNSUPPORTED}: object(expression: {expression!r}) without a path")
        try:
            commit = self.world.resolve_ref(repo, rev or "HEAD")
        except NotFound:
            return None
        path = path.strip("/")
        if path in commit.files:
            text = commit.files[path]
            binary = is_binary(text)
            return {
                "__typename": "Blob",
                "id": node_id("B", blob_sha(text)),
                "byteSize": len(text.encode("utf-8")),
                "isBinary": binary,
                "isTruncated": False,
                "text": None if binary else text,
            }
        if path == "" or any(p.startswith(path + "/") for p in commit.files):
            return {"__typename": "Tree", "id": node_id("T", f"{commit.sha}:{path}")}
        return None

    # ---------------------------------------------------------------- pull requests
    def _pull_request(self, repo: Repo, number: int) -> View:
        try:
            pull = self.world.pull(repo, number)
        except NotFound:
            raise GitHubError(
                "NOT_FOUND", f"Could not resolve to a PullRequest with the number of {number}."
            ) from None
        threads = [
            t
            for t in self.world.threads_of(pull)
            if self.actions.visible_comment(self.world.review_comments[t.comment_ids[0]], self.actor)
        ]
        decision = self.actions.review_decision(pull)
        required = CiActions.required_approvals(self.world.repo(pull.repo), pull)
        if required and decision != "CHANGES_REQUESTED":
            approvals = {r.user.lower() for r in self.world.reviews_of(pull) if r.state == "APPROVED"}
            decision = "APPROVED" if len(approvals) >= required else "REVIEW_REQUIRED"
        return {
            **self._pull_fields(repo, pull),
            "reviewDecision": decision,
            "reviewThreads": lambda _info, first=None, after=None: _page(
                "reviewThreads", [self._thread(t) for t in threads], first, after
            ),
            "reviews": lambda _info, first=None, after=None: _page(
                "reviews", self._reviews(pull), first, after
            ),
            "comments": lambda _info, first=None, after=None: _page(
                "comments", self._issue_comments(repo, pull), first, after
            ),
            "commits": lambda _info, last=None: self._head_commit(repo, pull, last),
        }

    def _pull_fields(self, repo: Repo, pull: Pull) -> View:
        """The scalar fields, as the REST pull request has them (``Shapes.pull``) in GraphQL's
        spelling: upper-case enums, a ``Bot`` without ``[bot]``, a mergeability GitHub computes
        lazily (UNKNOWN on the read that starts it, as REST's null)."""
        shapes = self.actions.shapes
        merge: list[dict[str, Any]] = []  # computed once, on the first field that asks

        def mergeability() -> dict[str, Any]:
            if not merge:
                merge.append(shapes.mergeability(pull))
            return merge[0]

        mergeable = {True: "MERGEABLE", False: "CONFLICTING", None: "UNKNOWN"}
        return {
            "number": pull.number,
            "state": "MERGED" if pull.merged else pull.state.upper(),
            "merged": pull.merged,
            "isDraft": pull.draft,
            "title": pull.title,
            "body": pull.body or "",
            "url": f"{shapes.repo_web(repo)}/pull/{pull.number}",
            "createdAt": pull.created_at,
            "updatedAt": pull.updated_at,
            "author": self._actor(pull.author),
            "headRefOid": pull.head_sha,
            "baseRefOid": shapes.base_sha(pull),
            "baseRefName": pull.base_ref,
            "mergeable": lambda _info: mergeable[mergeability()["mergeable"]],
            "mergeStateStatus": lambda _info: str(mergeability()["mergeable_state"]).upper(),
            "labels": lambda _info, first=None: _page("labels", [{"name": n} for n in pull.labels], first),
            "reviewRequests": lambda _info, first=None: _page(
                "reviewRequests",
                [{"requestedReviewer": self._actor(login)} for login in pull.requested_reviewers]
                + [{"requestedReviewer": {"__typename": "Team", "slug": t}} for t in pull.requested_teams],
                first,
            ),
        }

    def _reviews(self, pull: Pull) -> list[View]:
        """What ``GET .../reviews`` lists (another's pending review is invisible), oldest first."""
        return [
            {
                "databaseId": r.id,
                "state": r.state,
                "body": r.body,
                "submittedAt": r.submitted_at,
                "commit": {"oid": r.commit_id, "id": node_id("C", r.commit_id)},
                "author": self._actor(r.user),
            }
            for r in self.world.reviews_of(pull)
            if self.actions.visible_review(r, self.actor)
        ]

    def _issue_comments(self, repo: Repo, pull: Pull) -> list[View]:
        return [
            {
                "databaseId": c.id,
                "body": c.body,
                "createdAt": c.created_at,
                "updatedAt": c.updated_at,
                "author": self._actor(c.user),
            }
            for c in self.world.issue_comments_of(repo, pull.number)
        ]

    def _head_commit(self, repo: Repo, pull: Pull, last: int | None) -> View:
        """``commits(last: 1)``: the head commit, its commit statuses and its check suites."""
        if last is None:
            raise GitHubError(
                "INVALID_ARGUMENTS",
                "You must provide a `first` or `last` value to properly paginate the `commits` connection.",
            )
        sha = pull.head_sha
        commit = {
            "id": node_id("C", sha),
            "oid": sha,
            "status": lambda _info: self._status(repo, sha),
            "checkSuites": lambda _info, first=None, after=None: _page(
                "checkSuites", self._check_suites(repo, sha), first, after
            ),
        }
        return {"nodes": [{"commit": commit}][:last]}

    def _status(self, repo: Repo, sha: str) -> View | None:
        """The latest status of each context, newest first; null when the commit has none, and
        FORBIDDEN without the ``statuses`` permission (REST answers 403)."""
        if self.actions.shapes.app_info.permissions.get("statuses") not in ("read", "write"):
            raise GitHubError("FORBIDDEN", "Resource not accessible by integration")
        statuses = latest_statuses(self.world, repo, sha)
        if not statuses:
            return None
        return {
            "contexts": [
                {"context": s.context, "state": s.state.upper(), "createdAt": s.created_at} for s in statuses
            ]
        }

    def _check_suites(self, repo: Repo, sha: str) -> list[View]:
        """One suite per App on the commit; ``checkRuns(filterBy: {checkType: LATEST})`` keeps the
        newest run of each name, as REST's ``filter=latest`` does."""
        suites: dict[int, list[CheckRun]] = {}
        for run in sorted(self.world.check_runs.values(), key=lambda r: r.id):
            if run.repo == repo.key and run.head_sha == sha:
                suites.setdefault(run.check_suite_id, []).append(run)
        shapes = self.actions.shapes
        return [
            {
                "app": {
                    "slug": runs[0].app or shapes.app_info.slug,
                    "databaseId": shapes.app_id(runs[0].app),
                },
                "checkRuns": lambda _info, runs=runs, first=None, after=None, filterBy=None: _page(
                    "checkRuns", [self._check_run(r) for r in _latest(runs, filterBy)], first, after
                ),
            }
            for runs in suites.values()
        ]

    @staticmethod
    def _check_run(run: CheckRun) -> View:
        return {
            "databaseId": run.id,
            "name": run.name,
            "status": run.status.upper(),
            "conclusion": run.conclusion.upper() if run.conclusion else None,
            "startedAt": run.started_at,
            "completedAt": run.completed_at,
            "title": run.title,
            "summary": run.summary,
            "text": run.text,
        }

    def _thread(self, thread: Thread) -> View:
        comments = [self.world.review_comments[i] for i in thread.comment_ids]
        root = comments[0]
        visible = [c for c in comments if self.actions.visible_comment(c, self.actor)]
        return {
            "id": thread.node_id,
            "isResolved": thread.is_resolved,
            "path": root.path,
            "line": root.line,
            "comments": lambda _info, first=None: _page(
                "comments", [self._comment(c) for c in visible], first
            ),
        }

    def _comment(self, comment: ReviewComment) -> View:
        return {"databaseId": comment.id, "body": comment.body, "author": self._actor(comment.user)}

    def _actor(self, login: str) -> View:
        """GraphQL shows an App as a ``Bot`` whose login lacks the ``[bot]`` that REST shows."""
        user = self.world.user(login)
        if user.type == "Bot":
            return {"__typename": "Bot", "login": user.login.removesuffix("[bot]")}
        return {"__typename": "User", "login": user.login}
