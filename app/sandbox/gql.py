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
from .ci import CiActions
from .diff import is_binary
from .state import NotFound, Repo, ReviewComment, Thread, World, blob_sha, node_id

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
            "reviewDecision": decision,
            "reviewThreads": lambda _info, first=None, after=None: _page(
                "reviewThreads", [self._thread(t) for t in threads], first, after
            ),
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
