"""GraphQL over the fake's world: the part of GitHub's schema the bot uses, executed for real.

Documents are parsed by ``gqlparse`` and executed field by field, so aliases, fragments,
``__typename`` and nested selections behave as on GitHub and the answer holds exactly what was
asked. Supported: ``repository { pullRequest { reviewThreads/reviews/reviewRequests/files ... } }``,
``repository { object(expression: "REV:path") { ... on Blob { text byteSize isBinary } } }``,
``node(id:)``/``nodes(ids:)``, ``rateLimit``, and the mutations ``resolveReviewThread`` /
``unresolveReviewThread``. A field outside that set answers ``unsupported by the fake`` and is
recorded as a problem, so a test never passes on data the fake made up.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .actions import Actions, Emit
from .diff import is_binary
from .gqlparse import (
    Document,
    Field,
    FragmentSpread,
    GraphQLSyntaxError,
    InlineFragment,
    Selection,
    parse,
    resolve_value,
)
from .state import (
    Commit,
    NotFound,
    Pull,
    Repo,
    Review,
    ReviewComment,
    Thread,
    User,
    World,
    blob_sha,
    iso,
    node_id,
)

UNSUPPORTED = "unsupported by the fake"
MAX_PAGE = 100

IMPLEMENTS: dict[str, set[str]] = {
    "User": {"Actor", "Node", "UniformResourceLocatable", "RepositoryOwner", "ProfileOwner"},
    "Bot": {"Actor", "Node", "UniformResourceLocatable"},
    "Organization": {"Actor", "Node", "UniformResourceLocatable", "RepositoryOwner", "ProfileOwner"},
    "Repository": {"Node", "RepositoryInfo", "UniformResourceLocatable"},
    "PullRequest": {"Node", "Comment", "UniformResourceLocatable", "Closable", "Updatable", "Reactable"},
    "PullRequestReviewThread": {"Node"},
    "PullRequestReviewComment": {"Node", "Comment", "Reactable", "Updatable", "Deletable", "Minimizable"},
    "PullRequestReview": {"Node", "Comment", "Reactable", "Updatable", "Deletable"},
    "Blob": {"Node", "GitObject"},
    "Commit": {"Node", "GitObject", "UniformResourceLocatable"},
    "Tree": {"Node", "GitObject"},
    "Ref": {"Node"},
    "Team": {"Node"},
    "ReviewRequest": {"Node"},
}


class Unsupported(Exception):
    pass


class GqlNotFound(Exception):
    pass


@dataclass
class Obj:
    """A GraphQL object value: its concrete type name and the Python value behind it."""

    typename: str
    value: Any


@dataclass
class Connection:
    typename: str  # e.g. "PullRequestReviewThreadConnection"
    items: list[Obj]
    start: int
    total: int
    has_next: bool
    has_previous: bool


@dataclass
class Outcome:
    body: dict[str, Any]
    problems: list[str]


def operation_type(query: str, body: Any = None) -> str | None:
    """``query``/``mutation``/``subscription`` of the operation a request would run, if it parses."""
    try:
        document = parse(query)
        name = body.get("operationName") if isinstance(body, dict) else None
        return document.operation(name if isinstance(name, str) else None).kind
    except GraphQLSyntaxError:
        return None


def _cursor(index: int) -> str:
    return base64.b64encode(f"cursor:v2:{index}".encode()).decode()


def _uncursor(cursor: Any) -> int | None:
    if not isinstance(cursor, str):
        return None
    try:
        text = base64.b64decode(cursor.encode()).decode()
    except ValueError:
        return None
    prefix = "cursor:v2:"
    return int(text[len(prefix) :]) if text.startswith(prefix) and text[len(prefix) :].isdigit() else None


class Executor:
    """Runs one GraphQL request for one installation; ``emit`` receives mutation webhooks."""

    def __init__(
        self,
        world: World,
        actions: Actions,
        *,
        installation_id: int,
        actor: str,
        emit: Emit,
        rate_remaining: Callable[[], int],
    ) -> None:
        self.world = world
        self.actions = actions
        self.shapes = actions.shapes
        self.installation_id = installation_id
        self.actor = actor
        self.emit = emit
        self.rate_remaining = rate_remaining
        self.errors: list[dict[str, Any]] = []
        self.unsupported: list[str] = []
        self.variables: dict[str, Any] = {}
        self.document = Document()

    # ---------------------------------------------------------------- entry point
    def run(self, query: str, variables: dict[str, Any] | None, operation_name: str | None) -> Outcome:
        try:
            self.document = parse(query)
            operation = self.document.operation(operation_name)
        except GraphQLSyntaxError as exc:
            return Outcome({"errors": [{"message": str(exc)}]}, [f"GraphQL syntax: {exc}"])
        if operation.kind not in ("query", "mutation"):
            return Outcome(
                {"errors": [{"message": UNSUPPORTED}]}, [f"GraphQL {operation.kind}: {UNSUPPORTED}"]
            )
        supplied = variables or {}
        self.variables = {}
        for definition in operation.variables:
            if definition.name in supplied:
                self.variables[definition.name] = supplied[definition.name]
            elif definition.has_default:
                self.variables[definition.name] = resolve_value(definition.default, {})
        root = Obj("Query" if operation.kind == "query" else "Mutation", None)
        data = self.select(root, operation.selections, [])
        if self.unsupported:
            errors = [{"message": UNSUPPORTED, "extensions": {"field": f}} for f in self.unsupported]
            return Outcome(
                {"errors": errors}, [f"GraphQL field {f}: {UNSUPPORTED}" for f in self.unsupported]
            )
        body: dict[str, Any] = {"data": data}
        if self.errors:
            body["errors"] = self.errors
        return Outcome(body, [])

    # ---------------------------------------------------------------- selection
    def _applies(self, directives: list[Any]) -> bool:
        for directive in directives:
            condition = resolve_value(directive.args.get("if"), self.variables)
            if directive.name == "skip" and condition is True:
                return False
            if directive.name == "include" and condition is False:
                return False
        return True

    def _collect(self, typename: str, selections: list[Selection], into: dict[str, Field]) -> None:
        for sel in selections:
            if isinstance(sel, Field):
                if not self._applies(sel.directives):
                    continue
                seen = into.get(sel.key)
                if seen is not None and seen.selections is not None and sel.selections is not None:
                    into[sel.key] = Field(
                        seen.name, seen.alias, seen.args, seen.directives, [*seen.selections, *sel.selections]
                    )
                elif seen is None:
                    into[sel.key] = sel
                continue
            fragment: InlineFragment | None
            if isinstance(sel, FragmentSpread):
                fragment = self.document.fragments.get(sel.name)
                if fragment is None or not self._applies(sel.directives):
                    continue
            else:
                fragment = sel
            if not self._applies(fragment.directives):
                continue
            cond = fragment.type_condition
            if cond is None or cond == typename or cond in IMPLEMENTS.get(typename, set()):
                self._collect(typename, fragment.selections, into)

    def select(self, obj: Obj, selections: list[Selection], path: list[str | int]) -> dict[str, Any]:
        fields: dict[str, Field] = {}
        self._collect(obj.typename, selections, fields)
        out: dict[str, Any] = {}
        for key, fld in fields.items():
            where = [*path, key]
            if fld.name == "__typename":
                out[key] = obj.typename
                continue
            args = {k: resolve_value(v, self.variables) for k, v in fld.args.items()}
            try:
                value = self.resolve(obj, fld.name, args)
            except Unsupported:
                self.unsupported.append(f"{obj.typename}.{fld.name}")
                out[key] = None
                continue
            except GqlNotFound as exc:
                self.errors.append({"type": "NOT_FOUND", "path": where, "message": str(exc)})
                out[key] = None
                continue
            except ValueError as exc:
                self.errors.append({"type": "INVALID_ARGUMENTS", "path": where, "message": str(exc)})
                out[key] = None
                continue
            out[key] = self.complete(value, fld, where)
        return out

    def complete(self, value: Any, fld: Field, path: list[str | int]) -> Any:
        if isinstance(value, list):
            return [self.complete(v, fld, [*path, i]) for i, v in enumerate(value)]
        if isinstance(value, Obj | Connection):
            obj = value if isinstance(value, Obj) else Obj(value.typename, value)
            if fld.selections is None:
                raise_type = obj.typename
                self.errors.append({"path": path, "message": f"Field must have selections ({raise_type})"})
                return None
            return self.select(obj, fld.selections, path)
        return value

    # ---------------------------------------------------------------- dispatch
    def resolve(self, obj: Obj, name: str, args: dict[str, Any]) -> Any:
        if obj.typename.endswith("Connection") and isinstance(obj.value, Connection):
            return self.t_connection(obj.value, name)
        if obj.typename.endswith("Edge"):
            return self._edge(obj.value, name)
        method = getattr(self, f"t_{obj.typename}", None)
        if method is None:
            raise Unsupported
        return method(obj.value, name, args)

    # ---------------------------------------------------------------- helpers
    def _repo_visible(self, repo: Repo) -> bool:
        return repo.installation_id == self.installation_id

    def _actor(self, login: str | None) -> Obj | None:
        if login is None:
            return None
        user = self.world.user(login)
        return Obj(user.type if user.type in ("Bot", "Organization") else "User", user)

    def _paginate(self, typename: str, items: list[Obj], args: dict[str, Any], field: str) -> Connection:
        first, last = args.get("first"), args.get("last")
        if first is None and last is None:
            raise ValueError(
                f"You must provide a `first` or `last` value to properly paginate the `{field}` connection."
            )
        for label, amount in (("first", first), ("last", last)):
            if amount is not None and (not isinstance(amount, int) or amount < 0 or amount > MAX_PAGE):
                raise ValueError(
                    f"Requesting {amount} records on the `{field}` connection exceeds the `{label}` limit"
                    f" of {MAX_PAGE} records."
                )
        start, end = 0, len(items)
        after, before = _uncursor(args.get("after")), _uncursor(args.get("before"))
        if after is not None:
            start = after + 1
        if before is not None:
            end = min(end, before)
        if isinstance(first, int):
            end = min(end, start + first)
        if isinstance(last, int):
            start = max(start, end - last)
        window = items[start:end]
        return Connection(typename, window, start, len(items), end < len(items), start > 0)

    def t_connection(self, conn: Connection, name: str) -> Any:
        if name == "totalCount":
            return conn.total
        if name == "nodes":
            return conn.items
        if name == "edges":
            edge_type = conn.typename.removesuffix("Connection") + "Edge"
            return [Obj(edge_type, (conn.start + i, item)) for i, item in enumerate(conn.items)]
        if name == "pageInfo":
            return Obj("PageInfo", conn)
        raise Unsupported

    def _edge(self, value: tuple[int, Obj], name: str) -> Any:
        if name == "cursor":
            return _cursor(value[0])
        if name == "node":
            return value[1]
        raise Unsupported

    def t_PageInfo(self, conn: Connection, name: str, args: dict[str, Any]) -> Any:
        match name:
            case "hasNextPage":
                return conn.has_next
            case "hasPreviousPage":
                return conn.has_previous
            case "startCursor":
                return _cursor(conn.start) if conn.items else None
            case "endCursor":
                return _cursor(conn.start + len(conn.items) - 1) if conn.items else None
        raise Unsupported

    # ---------------------------------------------------------------- roots
    def t_Query(self, _: None, name: str, args: dict[str, Any]) -> Any:
        match name:
            case "repository":
                owner, repo_name = str(args.get("owner")), str(args.get("name"))
                try:
                    repo = self.world.repo(f"{owner}/{repo_name}")
                except NotFound:
                    repo = None
                if repo is None or not self._repo_visible(repo):
                    raise GqlNotFound(
                        f"Could not resolve to a Repository with the name '{owner}/{repo_name}'."
                    )
                return Obj("Repository", repo)
            case "node":
                return self._node(str(args.get("id")))
            case "nodes":
                ids = args.get("ids") or []
                return [self._node(str(i)) for i in ids]
            case "rateLimit":
                return Obj("RateLimit", None)
        raise Unsupported

    def _node(self, global_id: str) -> Obj:
        found = self._find_node(global_id)
        if found is None:
            raise GqlNotFound(f"Could not resolve to a node with the global id of '{global_id}'")
        return found

    def _find_node(self, global_id: str) -> Obj | None:
        thread = self.world.threads.get(global_id)
        if thread is not None:
            return (
                Obj("PullRequestReviewThread", thread)
                if self._repo_visible(self.world.repo(thread.repo))
                else None
            )
        for comment in self.world.review_comments.values():
            if comment.node_id == global_id and self._repo_visible(self.world.repo(comment.repo)):
                return Obj("PullRequestReviewComment", comment)
        for review in self.world.reviews.values():
            if review.node_id == global_id and self._repo_visible(self.world.repo(review.repo)):
                return Obj("PullRequestReview", review)
        for pull in self.world.pulls.values():
            if pull.node_id == global_id and self._repo_visible(self.world.repo(pull.repo)):
                return Obj("PullRequest", pull)
        for repo in self.world.repos.values():
            if repo.node_id == global_id and self._repo_visible(repo):
                return Obj("Repository", repo)
        for user in self.world.users.values():
            if user.node_id == global_id:
                return self._actor(user.login)
        return None

    def t_RateLimit(self, _: None, name: str, args: dict[str, Any]) -> Any:
        remaining = self.rate_remaining()
        match name:
            case "limit":
                return 5000
            case "cost":
                return 1
            case "remaining":
                return remaining
            case "used":
                return 5000 - remaining
            case "resetAt":
                return iso(time.time() + 3600)
            case "nodeCount":
                return 0
        raise Unsupported

    def t_Mutation(self, _: None, name: str, args: dict[str, Any]) -> Any:
        if name in ("resolveReviewThread", "unresolveReviewThread"):
            data = args.get("input")
            if not isinstance(data, dict) or not isinstance(data.get("threadId"), str):
                raise ValueError(f"Argument 'input' on Field '{name}' has an invalid value.")
            thread = self.world.threads.get(data["threadId"])
            if thread is None or not self._repo_visible(self.world.repo(thread.repo)):
                raise GqlNotFound(f"Could not resolve to a node with the global id of '{data['threadId']}'")
            self.actions.set_thread_resolved(thread, self.actor, name == "resolveReviewThread", self.emit)
            return Obj(name[0].upper() + name[1:] + "Payload", (thread, data.get("clientMutationId")))
        raise Unsupported

    def t_ResolveReviewThreadPayload(self, value: tuple[Thread, Any], name: str, args: dict[str, Any]) -> Any:
        match name:
            case "thread":
                return Obj("PullRequestReviewThread", value[0])
            case "clientMutationId":
                return value[1]
        raise Unsupported

    t_UnresolveReviewThreadPayload = t_ResolveReviewThreadPayload

    # ---------------------------------------------------------------- actors
    def _user_like(self, user: User, name: str, bare_login: bool) -> Any:
        login = user.login.removesuffix("[bot]") if bare_login else user.login
        match name:
            case "login":
                return login
            case "id":
                return user.node_id
            case "databaseId":
                return user.id
            case "url":
                return f"{self.shapes.web}/{'apps/' + login if user.type == 'Bot' else login}"
            case "resourcePath":
                return f"/{'apps/' + login if user.type == 'Bot' else login}"
            case "avatarUrl":
                return f"{self.shapes.web}/avatars/u/{user.id}?v=4"
            case "name":
                return user.name
            case "createdAt" | "updatedAt":
                return self.shapes.app_info.created_at
        raise Unsupported

    def t_User(self, user: User, name: str, args: dict[str, Any]) -> Any:
        return self._user_like(user, name, bare_login=False)

    def t_Organization(self, user: User, name: str, args: dict[str, Any]) -> Any:
        return self._user_like(user, name, bare_login=False)

    def t_Bot(self, user: User, name: str, args: dict[str, Any]) -> Any:
        if name == "name":
            raise Unsupported
        return self._user_like(user, name, bare_login=True)

    def t_Team(self, value: tuple[Repo, str], name: str, args: dict[str, Any]) -> Any:
        team = self.shapes.team(value[1], value[0])
        match name:
            case "slug" | "name":
                return team[name]
            case "id":
                return team["node_id"]
            case "databaseId":
                return team["id"]
            case "url":
                return team["html_url"]
            case "combinedSlug":
                return f"{value[0].owner}/{value[1]}"
        raise Unsupported

    # ---------------------------------------------------------------- repository and git objects
    def t_Repository(self, repo: Repo, name: str, args: dict[str, Any]) -> Any:
        match name:
            case "id":
                return repo.node_id
            case "databaseId":
                return repo.id
            case "name":
                return repo.name
            case "nameWithOwner":
                return repo.full_name
            case "owner":
                return self._actor(repo.owner)
            case "isPrivate":
                return repo.private
            case "visibility":
                return "PRIVATE" if repo.private else "PUBLIC"
            case "isArchived" | "isFork" | "isDisabled" | "isEmpty" | "isLocked":
                return name == "isEmpty" and not repo.commits
            case "description":
                return None
            case "url":
                return self.shapes.repo_web(repo)
            case "createdAt":
                return repo.created_at
            case "defaultBranchRef":
                return (
                    Obj("Ref", (repo, repo.default_branch)) if repo.default_branch in repo.branches else None
                )
            case "ref":
                qualified = str(args.get("qualifiedName") or "").removeprefix("refs/heads/")
                return Obj("Ref", (repo, qualified)) if qualified in repo.branches else None
            case "pullRequest":
                number = args.get("number")
                try:
                    pull = self.world.pull(repo, int(number)) if isinstance(number, int) else None
                except NotFound:
                    pull = None
                if pull is None:
                    raise GqlNotFound(f"Could not resolve to a PullRequest with the number of {number}.")
                return Obj("PullRequest", pull)
            case "object":
                return self._object(repo, args)
        raise Unsupported

    def _object(self, repo: Repo, args: dict[str, Any]) -> Obj | None:
        oid = args.get("oid")
        if isinstance(oid, str):
            commit = repo.commits.get(oid)
            return Obj("Commit", (repo, commit)) if commit else None
        expression = args.get("expression")
        if not isinstance(expression, str):
            raise ValueError("object requires an expression or an oid")
        rev, colon, path = expression.partition(":")
        try:
            commit = self.world.resolve_ref(repo, rev or "HEAD")
        except NotFound:
            return None
        if not colon:
            return Obj("Commit", (repo, commit))
        path = path.strip("/")
        if path in commit.files:
            return Obj("Blob", (repo, commit, path))
        if path == "" or any(p.startswith(path + "/") for p in commit.files):
            return Obj("Tree", (repo, commit, path))
        return None

    def t_Ref(self, value: tuple[Repo, str], name: str, args: dict[str, Any]) -> Any:
        repo, branch = value
        match name:
            case "name":
                return branch
            case "prefix":
                return "refs/heads/"
            case "id":
                return node_id("REF", f"{repo.key}:{branch}")
            case "target":
                return Obj("Commit", (repo, self.world.commit(repo, repo.branches[branch])))
        raise Unsupported

    def t_Commit(self, value: tuple[Repo, Commit], name: str, args: dict[str, Any]) -> Any:
        repo, commit = value
        match name:
            case "oid":
                return commit.sha
            case "abbreviatedOid":
                return commit.sha[:7]
            case "id":
                return node_id("C", commit.sha)
            case "message":
                return commit.message
            case "messageHeadline":
                return commit.message.splitlines()[0] if commit.message else ""
            case "committedDate" | "authoredDate" | "pushedDate":
                return commit.timestamp
            case "url":
                return f"{self.shapes.repo_web(repo)}/commit/{commit.sha}"
            case "tree":
                return Obj("Tree", (repo, commit, ""))
        raise Unsupported

    def t_Blob(self, value: tuple[Repo, Commit, str], name: str, args: dict[str, Any]) -> Any:
        repo, commit, path = value
        text = commit.files[path]
        binary = is_binary(text)
        match name:
            case "text":
                return None if binary else text
            case "byteSize":
                return len(text.encode("utf-8"))
            case "isBinary":
                return binary
            case "isTruncated":
                return False
            case "oid":
                return blob_sha(text)
            case "abbreviatedOid":
                return blob_sha(text)[:7]
            case "id":
                return node_id("B", blob_sha(text))
            case "commitUrl":
                return f"{self.shapes.repo_web(repo)}/commit/{commit.sha}"
            case "commitResourcePath":
                return f"/{repo.full_name}/commit/{commit.sha}"
        raise Unsupported

    def t_Tree(self, value: tuple[Repo, Commit, str], name: str, args: dict[str, Any]) -> Any:
        repo, commit, path = value
        prefix = f"{path}/" if path else ""
        children: dict[str, str] = {}
        for file_path in sorted(commit.files):
            if file_path.startswith(prefix):
                head = file_path[len(prefix) :].split("/", 1)[0]
                children.setdefault(head, "blob" if "/" not in file_path[len(prefix) :] else "tree")
        digest = blob_sha(repr(sorted(children.items())) + commit.sha + path)
        match name:
            case "oid":
                return digest
            case "abbreviatedOid":
                return digest[:7]
            case "id":
                return node_id("T", digest)
            case "entries":
                return [
                    Obj("TreeEntry", (repo, commit, prefix + child, kind)) for child, kind in children.items()
                ]
        raise Unsupported

    def t_TreeEntry(self, value: tuple[Repo, Commit, str, str], name: str, args: dict[str, Any]) -> Any:
        repo, commit, path, kind = value
        match name:
            case "name":
                return path.rsplit("/", 1)[-1]
            case "path":
                return path
            case "type":
                return kind
            case "mode":
                return 33188 if kind == "blob" else 16384
            case "oid":
                return blob_sha(commit.files[path]) if kind == "blob" else node_id("T", path)
            case "object":
                return Obj("Blob" if kind == "blob" else "Tree", (repo, commit, path))
        raise Unsupported

    # ---------------------------------------------------------------- pull requests
    def t_PullRequest(self, pull: Pull, name: str, args: dict[str, Any]) -> Any:
        repo = self.world.repo(pull.repo)
        match name:
            case "id":
                return pull.node_id
            case "databaseId" | "fullDatabaseId":
                return pull.id
            case "number":
                return pull.number
            case "title":
                return pull.title
            case "body" | "bodyText":
                return pull.body or ""
            case "url" | "permalink":
                return f"{self.shapes.repo_web(repo)}/pull/{pull.number}"
            case "resourcePath":
                return f"/{repo.full_name}/pull/{pull.number}"
            case "state":
                return "MERGED" if pull.merged else pull.state.upper()
            case "closed":
                return pull.state == "closed"
            case "merged":
                return pull.merged
            case "isDraft":
                return pull.draft
            case "locked":
                return False
            case "isCrossRepository":
                return False
            case "headRefName":
                return pull.head_ref
            case "headRefOid":
                return pull.head_sha
            case "baseRefName":
                return pull.base_ref
            case "baseRefOid":
                return self.shapes.base_sha(pull)
            case "author":
                return self._actor(pull.author)
            case "authorAssociation":
                return pull.author_association
            case "createdAt":
                return pull.created_at
            case "updatedAt":
                return pull.updated_at
            case "mergedAt" | "closedAt":
                return None
            case "additions" | "deletions" | "changedFiles":
                files = self.shapes.pull_files(pull)
                if name == "changedFiles":
                    return len(files)
                return sum(f.additions if name == "additions" else f.deletions for f in files)
            case "reviewDecision":
                return self.actions.review_decision(pull)
            case "repository" | "baseRepository" | "headRepository":
                return Obj("Repository", repo)
            case "reviewThreads":
                threads = [
                    Obj("PullRequestReviewThread", t)
                    for t in self.world.threads_of(pull)
                    if self._thread_visible(t)
                ]
                return self._paginate("PullRequestReviewThreadConnection", threads, args, name)
            case "reviews":
                states = args.get("states")
                reviews = [
                    Obj("PullRequestReview", r)
                    for r in self.world.reviews_of(pull)
                    if self.actions.visible_review(r, self.actor) and (not states or r.state in states)
                ]
                return self._paginate("PullRequestReviewConnection", reviews, args, name)
            case "reviewRequests":
                requests: list[Obj] = [
                    Obj("ReviewRequest", (pull, self._actor(login), login))
                    for login in pull.requested_reviewers
                ]
                requests += [
                    Obj("ReviewRequest", (pull, Obj("Team", (repo, slug)), f"team:{slug}"))
                    for slug in pull.requested_teams
                ]
                return self._paginate("ReviewRequestConnection", requests, args, name)
            case "files":
                changed = [Obj("PullRequestChangedFile", f) for f in self.shapes.pull_files(pull)]
                return self._paginate("PullRequestChangedFileConnection", changed, args, name)
        raise Unsupported

    def t_ReviewRequest(self, value: tuple[Pull, Obj | None, str], name: str, args: dict[str, Any]) -> Any:
        match name:
            case "requestedReviewer":
                return value[1]
            case "id":
                return node_id("RR", f"{value[0].node_id}:{value[2]}")
            case "asCodeOwner":
                return False
        raise Unsupported

    def t_PullRequestChangedFile(self, entry: Any, name: str, args: dict[str, Any]) -> Any:
        match name:
            case "path":
                return entry.filename
            case "additions":
                return entry.additions
            case "deletions":
                return entry.deletions
            case "changeType":
                return {"added": "ADDED", "removed": "DELETED", "renamed": "RENAMED"}.get(
                    entry.status, "MODIFIED"
                )
        raise Unsupported

    def _thread_visible(self, thread: Thread) -> bool:
        root = self.world.review_comments[thread.comment_ids[0]]
        return self.actions.visible_comment(root, self.actor)

    def t_PullRequestReviewThread(self, thread: Thread, name: str, args: dict[str, Any]) -> Any:
        root = self.world.review_comments[thread.comment_ids[0]]
        repo = self.world.repo(thread.repo)
        outdated = root.subject_type == "line" and root.line is None
        match name:
            case "id":
                return thread.node_id
            case "isResolved":
                return thread.is_resolved
            case "isCollapsed":
                return thread.is_resolved
            case "isOutdated":
                return outdated
            case "path":
                return root.path
            case "line":
                return root.line
            case "originalLine":
                return root.original_line
            case "startLine":
                return root.start_line
            case "originalStartLine":
                return root.original_start_line
            case "diffSide":
                return root.side
            case "startDiffSide":
                return root.start_side
            case "subjectType":
                return root.subject_type.upper()
            case "resolvedBy":
                return self._actor(thread.resolved_by)
            case "viewerCanResolve":
                return not thread.is_resolved
            case "viewerCanUnresolve":
                return thread.is_resolved
            case "viewerCanReply":
                return True
            case "comments":
                items = [
                    Obj("PullRequestReviewComment", self.world.review_comments[i])
                    for i in thread.comment_ids
                    if self.actions.visible_comment(self.world.review_comments[i], self.actor)
                ]
                return self._paginate("PullRequestReviewCommentConnection", items, args, name)
            case "pullRequest":
                return Obj("PullRequest", self.world.pull(repo, thread.number))
            case "repository":
                return Obj("Repository", repo)
        raise Unsupported

    def t_PullRequestReviewComment(self, comment: ReviewComment, name: str, args: dict[str, Any]) -> Any:
        repo = self.world.repo(comment.repo)
        match name:
            case "id":
                return comment.node_id
            case "databaseId" | "fullDatabaseId":
                return comment.id
            case "body" | "bodyText":
                return comment.body
            case "bodyHTML":
                return f"<p>{comment.body}</p>"
            case "author":
                return self._actor(comment.user)
            case "authorAssociation":
                return comment.author_association
            case "createdAt" | "publishedAt" | "draftedAt":
                return comment.created_at
            case "updatedAt":
                return comment.updated_at
            case "lastEditedAt":
                return None
            case "path":
                return comment.path
            case "line":
                return comment.line
            case "originalLine":
                return comment.original_line
            case "startLine":
                return comment.start_line
            case "originalStartLine":
                return comment.original_start_line
            case "position":
                return comment.position
            case "originalPosition":
                return comment.original_position
            case "diffHunk":
                return comment.diff_hunk
            case "outdated":
                return comment.subject_type == "line" and comment.line is None
            case "isMinimized":
                return False
            case "minimizedReason":
                return None
            case "state":
                review = self.world.reviews.get(comment.review_id)
                return "PENDING" if review and review.state == "PENDING" else "SUBMITTED"
            case "subjectType":
                return comment.subject_type.upper()
            case "url":
                return f"{self.shapes.repo_web(repo)}/pull/{comment.number}#discussion_r{comment.id}"
            case "resourcePath":
                return f"/{repo.full_name}/pull/{comment.number}#discussion_r{comment.id}"
            case "commit":
                return Obj("Commit", (repo, self.world.commit(repo, comment.commit_id)))
            case "originalCommit":
                return Obj("Commit", (repo, self.world.commit(repo, comment.original_commit_id)))
            case "replyTo":
                parent = self.world.review_comments.get(comment.in_reply_to_id or -1)
                return Obj("PullRequestReviewComment", parent) if parent else None
            case "pullRequestReview":
                review = self.world.reviews.get(comment.review_id)
                return Obj("PullRequestReview", review) if review else None
            case "pullRequest":
                return Obj("PullRequest", self.world.pull(repo, comment.number))
            case "repository":
                return Obj("Repository", repo)
            case "viewerDidAuthor":
                return comment.user.lower() == self.actor.lower()
            case "viewerCanUpdate" | "viewerCanDelete" | "viewerCanMinimize":
                return comment.user.lower() == self.actor.lower()
            case "viewerCanReact":
                return True
            case "includesCreatedEdit" | "createdViaEmail":
                return False
            case "editor":
                return None
        raise Unsupported

    def t_PullRequestReview(self, review: Review, name: str, args: dict[str, Any]) -> Any:
        repo = self.world.repo(review.repo)
        match name:
            case "id":
                return review.node_id
            case "databaseId" | "fullDatabaseId":
                return review.id
            case "state":
                return review.state
            case "body" | "bodyText":
                return review.body
            case "author":
                return self._actor(review.user)
            case "authorAssociation":
                return review.author_association
            case "submittedAt" | "publishedAt":
                return review.submitted_at
            case "createdAt" | "updatedAt":
                return review.submitted_at or iso()
            case "commit":
                return Obj("Commit", (repo, self.world.commit(repo, review.commit_id)))
            case "url":
                return f"{self.shapes.repo_web(repo)}/pull/{review.number}#pullrequestreview-{review.id}"
            case "viewerDidAuthor":
                return review.user.lower() == self.actor.lower()
            case "pullRequest":
                return Obj("PullRequest", self.world.pull(repo, review.number))
            case "repository":
                return Obj("Repository", repo)
            case "comments":
                items = [
                    Obj("PullRequestReviewComment", self.world.review_comments[i]) for i in review.comment_ids
                ]
                return self._paginate("PullRequestReviewCommentConnection", items, args, name)
        raise Unsupported
