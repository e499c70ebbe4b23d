"""REST endpoints: one small function per GitHub operation, and the route table.

Handlers are synchronous: each reads or changes the world in one step, so concurrent requests
can never observe half a write. Paths are matched without a GHES ``/api/v3`` prefix.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .context import Ctx, Reply
from .diff import MAX_FILES
from .errors import ApiError, not_found, validation_failed
from .state import NotFound, blob_sha

Handler = Callable[[Ctx], Reply]


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    handler: Handler
    auth: str  # "jwt" | "token" | "none"


# ---------------------------------------------------------------------------------- the App (JWT)
def get_app(ctx: Ctx) -> Reply:
    return Reply(200, ctx.fake.shapes.app())


def list_installations(ctx: Ctx) -> Reply:
    shapes = ctx.fake.shapes
    return ctx.page([shapes.installation(i) for i in ctx.fake.world.installations.values()])


def get_installation(ctx: Ctx) -> Reply:
    inst = ctx.fake.world.installations.get(ctx.int_param("installation_id"))
    if inst is None:
        raise not_found()
    return Reply(200, ctx.fake.shapes.installation(inst))


def create_access_token(ctx: Ctx) -> Reply:
    inst = ctx.fake.world.installations.get(ctx.int_param("installation_id"))
    if inst is None:
        raise not_found()
    issued = ctx.fake.tokens.issue(inst.id)
    ctx.fake.tokens_issued.append((inst.id, issued.token.token, issued.expires_at_iso))
    body = {
        "token": issued.token.token,
        "expires_at": issued.expires_at_iso,
        "permissions": dict(ctx.fake.shapes.app()["permissions"]),
        "repository_selection": "all",
    }
    return Reply(201, body)


def get_repo_installation(ctx: Ctx) -> Reply:
    try:
        repo = ctx.fake.world.repo(f"{ctx.params['owner']}/{ctx.params['repo']}")
    except NotFound:
        raise not_found() from None
    return Reply(200, ctx.fake.shapes.installation(ctx.fake.world.installations[repo.installation_id]))


# ---------------------------------------------------------------------------------- the App's webhook
def get_hook_config(ctx: Ctx) -> Reply:
    fake = ctx.fake
    body: dict[str, Any] = {"content_type": fake.hooks.content_type, "insecure_ssl": fake.hooks.insecure_ssl}
    if fake.webhook_url is not None:
        body["url"] = fake.webhook_url
    if fake.webhook_secret:
        body["secret"] = "********"  # GitHub never shows a secret, only that one is set
    return Reply(200, body)


def update_hook_config(ctx: Ctx) -> Reply:
    body = ctx.json_object()
    if "url" in body:
        ctx.fake.webhook_url = str(body["url"]) or None
    if "secret" in body:
        ctx.fake.set_webhook_secret(str(body["secret"] or ""))
    for key in ("content_type", "insecure_ssl"):
        if key in body:
            setattr(ctx.fake.hooks, key, str(body[key]))
    return get_hook_config(ctx)


def list_hook_deliveries(ctx: Ctx) -> Reply:
    try:
        per_page = max(1, min(int(ctx.query.get("per_page", 30)), 100))
    except ValueError:
        raise validation_failed("Delivery", "per_page", "invalid", "per_page must be a number") from None
    try:
        chunk, following = ctx.fake.hooks.page(
            cursor=ctx.query.get("cursor"),
            per_page=per_page,
            outcome=ctx.query.get("status"),
            now=time.time(),
        )
    except ValueError:
        raise ApiError(400, "Invalid cursor") from None
    headers = {}
    if following is not None:
        query = {**ctx.query, "per_page": str(per_page), "cursor": following}
        headers["Link"] = f'<{ctx.url.with_query(query)}>; rel="next"'
    return Reply(200, [d.item() for d in chunk], headers)


def get_hook_delivery(ctx: Ctx) -> Reply:
    found = ctx.fake.hooks.find(ctx.int_param("delivery_id"))
    if found is None:
        raise not_found()
    return Reply(200, found.full())


def convert_manifest(ctx: Ctx) -> Reply:
    return Reply(201, ctx.fake.convert_manifest(ctx.params["code"]))


# ---------------------------------------------------------------------------------- repositories
def list_installation_repos(ctx: Ctx) -> Reply:
    repos = [r for r in ctx.fake.world.repos.values() if r.installation_id == ctx.installation_id]
    return ctx.page([ctx.fake.shapes.repo(r) for r in repos], wrap="repositories")


def get_repo(ctx: Ctx) -> Reply:
    body = ctx.fake.shapes.repo(ctx.repo())
    body["permissions"] = {"admin": False, "maintain": False, "push": False, "triage": False, "pull": True}
    return Reply(200, body)


def get_contents(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    world, shapes = ctx.fake.world, ctx.fake.shapes
    ref = ctx.query.get("ref")
    try:
        commit = world.resolve_ref(repo, ref)
    except NotFound:
        raise ApiError(404, f"No commit found for the ref {ref}") from None
    path = ctx.params["path"].strip("/")
    api = shapes.repo_api(repo)
    web = shapes.repo_web(repo)

    def entry(item_path: str, kind: str) -> dict[str, Any]:
        sha = (
            blob_sha(commit.files[item_path])
            if kind == "file"
            else blob_sha(f"tree:{commit.sha}:{item_path}")
        )
        url = f"{api}/contents/{item_path}?ref={ref or repo.default_branch}"
        html = f"{web}/{'blob' if kind == 'file' else 'tree'}/{ref or repo.default_branch}/{item_path}"
        git_url = f"{api}/git/{'blobs' if kind == 'file' else 'trees'}/{sha}"
        size = len(commit.files[item_path].encode("utf-8")) if kind == "file" else 0
        return {
            "type": kind,
            "size": size,
            "name": item_path.rsplit("/", 1)[-1],
            "path": item_path,
            "sha": sha,
            "url": url,
            "git_url": git_url,
            "html_url": html,
            "download_url": f"{web}/raw/{commit.sha}/{item_path}" if kind == "file" else None,
            "_links": {"self": url, "git": git_url, "html": html},
        }

    if path in commit.files:
        text = commit.files[path]
        if "raw" in ctx.headers.get("accept", ""):
            return Reply(200, text=text, content_type="application/vnd.github.raw; charset=utf-8")
        data = entry(path, "file")
        raw = text.encode("utf-8")
        if len(raw) > 1024 * 1024:
            data.update({"content": "", "encoding": "none"})
        else:
            encoded = base64.b64encode(raw).decode()
            data.update(
                {"content": "\n".join(encoded[i : i + 60] for i in range(0, len(encoded), 60)) + "\n"}
            )
            data["encoding"] = "base64"
        return Reply(200, data)
    prefix = path + "/"
    children: dict[str, str] = {}
    for file_path in sorted(commit.files):
        if file_path.startswith(prefix):
            rest = file_path[len(prefix) :]
            head = rest.split("/", 1)[0]
            children.setdefault(prefix + head, "file" if "/" not in rest else "dir")
    if not children:
        raise not_found()
    listing = []
    for child, kind in children.items():
        item = entry(child, kind) if kind == "file" else entry(child, "dir")
        listing.append(item)
    return Reply(200, listing)


def get_tree(ctx: Ctx) -> Reply:
    """``GET /git/trees/{tree_sha}``: a commit sha or a branch name stands for its tree. Only the
    recursive listing of a whole commit is modelled (what the bot asks for); without
    ``recursive`` the top level is listed."""
    repo = ctx.repo()
    try:
        commit = ctx.fake.world.resolve_ref(repo, ctx.params["tree_sha"])
    except NotFound:
        raise not_found() from None
    api = ctx.fake.shapes.repo_api(repo)
    recursive = "recursive" in ctx.query
    tree_sha = blob_sha(f"tree:{commit.sha}:")
    entries: dict[str, dict[str, Any]] = {}
    for path in sorted(commit.files):
        parts = path.split("/")
        for depth in range(1, len(parts)):
            directory = "/".join(parts[:depth])
            if directory not in entries and (recursive or depth == 1):
                sha = blob_sha(f"tree:{commit.sha}:{directory}")
                entries[directory] = {
                    "path": directory,
                    "mode": "040000",
                    "type": "tree",
                    "sha": sha,
                    "url": f"{api}/git/trees/{sha}",
                }
        if recursive or len(parts) == 1:
            sha = blob_sha(commit.files[path])
            entries[path] = {
                "path": path,
                "mode": "100644",
                "type": "blob",
                "sha": sha,
                "size": len(commit.files[path].encode("utf-8")),
                "url": f"{api}/git/blobs/{sha}",
            }
    body = {
        "sha": tree_sha,
        "url": f"{api}/git/trees/{tree_sha}",
        "tree": [entries[key] for key in sorted(entries)],
        "truncated": False,
    }
    return Reply(200, body)


def get_permission(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    login = ctx.params["username"]
    user = ctx.fake.world.known_user(login)
    if user is None:
        raise not_found()
    permission = ctx.fake.permission_of(repo, user.login)
    body = {
        "permission": permission,
        "role_name": {"admin": "admin", "write": "write", "read": "read"}.get(permission, "none"),
        "user": {
            **ctx.fake.shapes.user(user),
            "permissions": {
                "admin": permission == "admin",
                "maintain": permission == "admin",
                "push": permission in ("admin", "write"),
                "triage": permission in ("admin", "write"),
                "pull": permission != "none",
            },
            "role_name": permission,
        },
    }
    return Reply(200, body)


# ---------------------------------------------------------------------------------- pull requests
def list_pulls(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    state = ctx.query.get("state", "open")
    head, base = ctx.query.get("head"), ctx.query.get("base")
    pulls = [
        p
        for p in ctx.fake.world.pulls_of(repo)
        if (state == "all" or p.state == state)
        and (head is None or head.split(":")[-1] == p.head_ref)
        and (base is None or base == p.base_ref)
    ]
    pulls.sort(key=lambda p: p.number, reverse=ctx.query.get("direction", "desc") == "desc")
    return ctx.page([ctx.fake.shapes.pull(p, simple=True) for p in pulls])


def get_pull(ctx: Ctx) -> Reply:
    return Reply(200, ctx.fake.shapes.pull(ctx.pull()))


def list_pull_files(ctx: Ctx) -> Reply:
    pull = ctx.pull()
    shapes = ctx.fake.shapes
    files = shapes.pull_files(pull)[:MAX_FILES]
    return ctx.page([shapes.diff_entry(pull, f) for f in files])


def compare_commits(ctx: Ctx) -> Reply:
    """``GET /compare/{base}...{head}``: refs or shas; 404 when either is unknown (as GitHub
    answers for a commit a force-push left unreachable and collected)."""
    repo = ctx.repo()
    base, sep, head = ctx.params["basehead"].partition("...")
    if not sep or not base or not head:
        raise not_found()
    try:
        base_sha = ctx.fake.world.resolve_ref(repo, base).sha
        head_sha = ctx.fake.world.resolve_ref(repo, head).sha
    except NotFound:
        raise not_found() from None
    return Reply(200, ctx.fake.shapes.comparison(repo, base_sha, head_sha))


def list_reviews(ctx: Ctx) -> Reply:
    pull = ctx.pull()
    actions = ctx.fake.actions
    reviews = [r for r in ctx.fake.world.reviews_of(pull) if actions.visible_review(r, ctx.actor)]
    return ctx.page([ctx.fake.shapes.review(r) for r in reviews])


def create_review(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    pull = ctx.pull(repo)
    body = ctx.json_object()
    comments = body.get("comments")
    review = ctx.fake.actions.create_review(
        repo,
        pull,
        ctx.actor,
        body=body.get("body"),
        event=body.get("event"),
        comments=comments if isinstance(comments, list) else None,
        commit_id=body.get("commit_id"),
        emit=ctx.emit,
    )
    return Reply(200, ctx.fake.shapes.review(review))


def _review(ctx: Ctx) -> Any:
    pull = ctx.pull()
    review = ctx.fake.world.reviews.get(ctx.int_param("review_id"))
    if review is None or review.repo != pull.repo or review.number != pull.number:
        raise not_found()
    if not ctx.fake.actions.visible_review(review, ctx.actor):
        raise not_found()
    return review


def get_review(ctx: Ctx) -> Reply:
    return Reply(200, ctx.fake.shapes.review(_review(ctx)))


def list_review_comments_of_review(ctx: Ctx) -> Reply:
    review = _review(ctx)
    comments = [ctx.fake.world.review_comments[i] for i in review.comment_ids]
    return ctx.page([ctx.fake.shapes.review_comment(c) for c in comments])


def dismiss_review(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    pull = ctx.pull(repo)
    body = ctx.json_object()
    review = ctx.fake.actions.dismiss_review(
        repo, pull, ctx.int_param("review_id"), ctx.actor, str(body.get("message") or ""), ctx.emit
    )
    return Reply(200, ctx.fake.shapes.review(review))


def list_pull_review_comments(ctx: Ctx) -> Reply:
    pull = ctx.pull()
    actions = ctx.fake.actions
    comments = [c for c in ctx.fake.world.review_comments_of(pull) if actions.visible_comment(c, ctx.actor)]
    return ctx.page([ctx.fake.shapes.review_comment(c) for c in comments])


def reply_to_review_comment(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    pull = ctx.pull(repo)
    body = ctx.json_object()
    comment = ctx.fake.actions.reply(
        repo, pull, ctx.int_param("comment_id"), ctx.actor, str(body.get("body") or ""), ctx.emit
    )
    return Reply(201, ctx.fake.shapes.review_comment(comment))


def _review_comment(ctx: Ctx) -> Any:
    repo = ctx.repo()
    comment = ctx.fake.world.review_comments.get(ctx.int_param("comment_id"))
    if (
        comment is None
        or comment.repo != repo.key
        or not ctx.fake.actions.visible_comment(comment, ctx.actor)
    ):
        raise not_found()
    return comment


def get_review_comment(ctx: Ctx) -> Reply:
    return Reply(200, ctx.fake.shapes.review_comment(_review_comment(ctx)))


def list_requested_reviewers(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    pull = ctx.pull(repo)
    shapes = ctx.fake.shapes
    users = [shapes.user(login) for login in pull.requested_reviewers]
    teams = [shapes.team(slug, repo) for slug in pull.requested_teams]
    return Reply(200, {"users": users, "teams": teams})


def _logins(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def add_requested_reviewers(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    pull = ctx.pull(repo)
    body = ctx.json_object()
    reviewers, teams = _logins(body.get("reviewers")), _logins(body.get("team_reviewers"))
    ctx.fake.actions.request_reviewers(repo, pull, ctx.actor, reviewers, teams, ctx.emit)
    return Reply(201, ctx.fake.shapes.pull(pull, simple=True))


def remove_requested_reviewers(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    pull = ctx.pull(repo)
    body = ctx.json_object()
    reviewers, teams = _logins(body.get("reviewers")), _logins(body.get("team_reviewers"))
    ctx.fake.actions.remove_reviewers(repo, pull, ctx.actor, reviewers, teams, ctx.emit)
    return Reply(200, ctx.fake.shapes.pull(pull, simple=True))


# ---------------------------------------------------------------------------------- issue comments
def list_issue_comments(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    pull = ctx.pull(repo)
    since = ctx.query.get("since")
    comments = [
        c for c in ctx.fake.world.issue_comments_of(repo, pull.number) if not since or c.updated_at >= since
    ]
    return ctx.page([ctx.fake.shapes.issue_comment(c) for c in comments])


def create_issue_comment(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    pull = ctx.pull(repo)
    body = ctx.json_object()
    comment = ctx.fake.actions.add_issue_comment(
        repo, pull, ctx.actor, str(body.get("body") or ""), ctx.emit, via_app=True
    )
    return Reply(201, ctx.fake.shapes.issue_comment(comment))


def _issue_comment(ctx: Ctx) -> Any:
    repo = ctx.repo()
    comment = ctx.fake.world.issue_comments.get(ctx.int_param("comment_id"))
    if comment is None or comment.repo != repo.key:
        raise not_found()
    return comment


def get_issue_comment(ctx: Ctx) -> Reply:
    return Reply(200, ctx.fake.shapes.issue_comment(_issue_comment(ctx)))


def update_issue_comment(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    comment = _issue_comment(ctx)
    if comment.user.lower() != ctx.actor.lower():
        raise ApiError(403, "Resource not accessible by integration")
    body = ctx.json_object()
    ctx.fake.actions.edit_issue_comment(repo, comment, ctx.actor, str(body.get("body") or ""), ctx.emit)
    return Reply(200, ctx.fake.shapes.issue_comment(comment))


# ---------------------------------------------------------------------------------- reactions
def _subject(ctx: Ctx, kind: str) -> tuple[str, int]:
    repo = ctx.repo()
    world = ctx.fake.world
    if kind == "issue":
        ctx.pull(repo)
        return "issue", ctx.int_param("number")
    comment_id = ctx.int_param("comment_id")
    found: Any = (
        world.issue_comments.get(comment_id)
        if kind == "issue_comment"
        else world.review_comments.get(comment_id)
    )
    if found is None or found.repo != repo.key:
        raise not_found()
    return kind, comment_id


def _list_reactions(kind: str) -> Handler:
    def handler(ctx: Ctx) -> Reply:
        subject = _subject(ctx, kind)
        repo = ctx.repo()
        content = ctx.query.get("content")
        found = [
            r
            for r in ctx.fake.world.reactions
            if r.repo == repo.key and r.subject == subject and (content is None or r.content == content)
        ]
        return ctx.page([ctx.fake.shapes.reaction(r) for r in found])

    return handler


def _create_reaction(kind: str) -> Handler:
    def handler(ctx: Ctx) -> Reply:
        subject = _subject(ctx, kind)
        body = ctx.json_object()
        reaction, created = ctx.fake.actions.react(ctx.repo(), subject, ctx.actor, body.get("content"))
        return Reply(201 if created else 200, ctx.fake.shapes.reaction(reaction))

    return handler


# ---------------------------------------------------------------------------------- check runs
def create_check_run(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    run = ctx.fake.actions.create_check_run(repo, ctx.actor, ctx.json_object(), ctx.emit)
    return Reply(201, ctx.fake.shapes.check_run(run))


def _check_run(ctx: Ctx) -> Any:
    repo = ctx.repo()
    run = ctx.fake.world.check_runs.get(ctx.int_param("check_run_id"))
    if run is None or run.repo != repo.key:
        raise not_found()
    return run


def get_check_run(ctx: Ctx) -> Reply:
    return Reply(200, ctx.fake.shapes.check_run(_check_run(ctx)))


def update_check_run(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    run = _check_run(ctx)
    if ctx.fake.shapes.app_id(run.app) != ctx.fake.shapes.app_id():
        raise ApiError(
            403,
            f"Invalid app_id `{ctx.fake.shapes.app_id(run.app)}` - check run can only be modified by"
            " the GitHub App that created it.",
        )
    ctx.fake.actions.update_check_run(repo, run, ctx.actor, ctx.json_object(), ctx.emit)
    return Reply(200, ctx.fake.shapes.check_run(run))


def list_annotations(ctx: Ctx) -> Reply:
    run = _check_run(ctx)
    return ctx.page([ctx.fake.shapes.annotation(run, a) for a in run.annotations])


def list_check_runs_for_ref(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    world = ctx.fake.world
    try:
        sha = world.resolve_ref(repo, ctx.params["ref"]).sha
    except NotFound:
        raise validation_failed(
            "Commit", "ref", "invalid", f"No commit found for SHA: {ctx.params['ref']}"
        ) from None
    name, status, app_id = ctx.query.get("check_name"), ctx.query.get("status"), ctx.query.get("app_id")
    runs = [
        r
        for r in world.check_runs.values()
        if r.repo == repo.key
        and r.head_sha == sha
        and (name is None or r.name == name)
        and (status is None or r.status == status)
        and (app_id is None or str(ctx.fake.shapes.app_id(r.app)) == app_id)
    ]
    if ctx.query.get("filter", "latest") == "latest":
        latest: dict[tuple[str, str], Any] = {}
        for run in runs:  # the newest of each name, per App (two Apps may share a name)
            latest[run.app, run.name] = run
        runs = list(latest.values())
    runs.sort(key=lambda r: r.id, reverse=True)
    return ctx.page([ctx.fake.shapes.check_run(r) for r in runs], wrap="check_runs")


# ---------------------------------------------------------------------------------- statuses, rules
def get_combined_status(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    if ctx.fake.shapes.app_info.permissions.get("statuses") not in ("read", "write"):
        raise ApiError(403, "Resource not accessible by integration")
    try:
        sha = ctx.fake.world.resolve_ref(repo, ctx.params["ref"]).sha
    except NotFound:
        raise not_found() from None
    return Reply(200, ctx.fake.ci.ci.combined(repo, sha))


def get_branch(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    if ctx.params["branch"] not in repo.branches:
        raise not_found()
    return Reply(200, ctx.fake.ci.branch(repo, ctx.params["branch"]))


def get_branch_rules(ctx: Ctx) -> Reply:
    return ctx.page(ctx.fake.ci.branch_rules(ctx.repo(), ctx.params["branch"]))


# ---------------------------------------------------------------------------------- route table
_OWNER_REPO = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
_PULL = _OWNER_REPO + r"/pulls/(?P<number>\d+)"


def _r(method: str, pattern: str, handler: Handler, auth: str = "token") -> Route:
    return Route(method, re.compile(pattern + "/?"), handler, auth)


ROUTES: list[Route] = [
    _r("GET", r"/app", get_app, "jwt"),
    _r("GET", r"/app/installations", list_installations, "jwt"),
    _r("GET", r"/app/installations/(?P<installation_id>\d+)", get_installation, "jwt"),
    _r("POST", r"/app/installations/(?P<installation_id>\d+)/access_tokens", create_access_token, "jwt"),
    _r("GET", _OWNER_REPO + r"/installation", get_repo_installation, "jwt"),
    _r("GET", r"/app/hook/config", get_hook_config, "jwt"),
    _r("PATCH", r"/app/hook/config", update_hook_config, "jwt"),
    _r("GET", r"/app/hook/deliveries", list_hook_deliveries, "jwt"),
    _r("GET", r"/app/hook/deliveries/(?P<delivery_id>\d+)", get_hook_delivery, "jwt"),
    _r("POST", r"/app-manifests/(?P<code>[^/]+)/conversions", convert_manifest, "none"),
    _r("GET", r"/installation/repositories", list_installation_repos),
    _r("GET", _OWNER_REPO, get_repo),
    _r("GET", _OWNER_REPO + r"/contents/(?P<path>.+)", get_contents),
    _r("GET", _OWNER_REPO + r"/git/trees/(?P<tree_sha>[^/]+)", get_tree),
    _r("GET", _OWNER_REPO + r"/compare/(?P<basehead>.+)", compare_commits),
    _r("GET", _OWNER_REPO + r"/collaborators/(?P<username>[^/]+)/permission", get_permission),
    _r("GET", _OWNER_REPO + r"/pulls", list_pulls),
    _r("GET", _OWNER_REPO + r"/pulls/comments/(?P<comment_id>\d+)", get_review_comment),
    _r(
        "GET",
        _OWNER_REPO + r"/pulls/comments/(?P<comment_id>\d+)/reactions",
        _list_reactions("review_comment"),
    ),
    _r(
        "POST",
        _OWNER_REPO + r"/pulls/comments/(?P<comment_id>\d+)/reactions",
        _create_reaction("review_comment"),
    ),
    _r("GET", _PULL, get_pull),
    _r("GET", _PULL + r"/files", list_pull_files),
    _r("GET", _PULL + r"/reviews", list_reviews),
    _r("POST", _PULL + r"/reviews", create_review),
    _r("GET", _PULL + r"/reviews/(?P<review_id>\d+)", get_review),
    _r("GET", _PULL + r"/reviews/(?P<review_id>\d+)/comments", list_review_comments_of_review),
    _r("PUT", _PULL + r"/reviews/(?P<review_id>\d+)/dismissals", dismiss_review),
    _r("GET", _PULL + r"/comments", list_pull_review_comments),
    _r("POST", _PULL + r"/comments/(?P<comment_id>\d+)/replies", reply_to_review_comment),
    _r("GET", _PULL + r"/requested_reviewers", list_requested_reviewers),
    _r("POST", _PULL + r"/requested_reviewers", add_requested_reviewers),
    _r("DELETE", _PULL + r"/requested_reviewers", remove_requested_reviewers),
    _r("GET", _OWNER_REPO + r"/issues/comments/(?P<comment_id>\d+)", get_issue_comment),
    _r("PATCH", _OWNER_REPO + r"/issues/comments/(?P<comment_id>\d+)", update_issue_comment),
    _r(
        "GET",
        _OWNER_REPO + r"/issues/comments/(?P<comment_id>\d+)/reactions",
        _list_reactions("issue_comment"),
    ),
    _r(
        "POST",
        _OWNER_REPO + r"/issues/comments/(?P<comment_id>\d+)/reactions",
        _create_reaction("issue_comment"),
    ),
    _r("GET", _OWNER_REPO + r"/issues/(?P<number>\d+)/comments", list_issue_comments),
    _r("POST", _OWNER_REPO + r"/issues/(?P<number>\d+)/comments", create_issue_comment),
    _r("GET", _OWNER_REPO + r"/issues/(?P<number>\d+)/reactions", _list_reactions("issue")),
    _r("POST", _OWNER_REPO + r"/issues/(?P<number>\d+)/reactions", _create_reaction("issue")),
    _r("POST", _OWNER_REPO + r"/check-runs", create_check_run),
    _r("GET", _OWNER_REPO + r"/check-runs/(?P<check_run_id>\d+)", get_check_run),
    _r("PATCH", _OWNER_REPO + r"/check-runs/(?P<check_run_id>\d+)", update_check_run),
    _r("GET", _OWNER_REPO + r"/check-runs/(?P<check_run_id>\d+)/annotations", list_annotations),
    _r("GET", _OWNER_REPO + r"/commits/(?P<ref>.+)/check-runs", list_check_runs_for_ref),
    _r("GET", _OWNER_REPO + r"/commits/(?P<ref>.+)/status", get_combined_status),
    _r("GET", _OWNER_REPO + r"/rules/branches/(?P<branch>.+)", get_branch_rules),
    _r("GET", _OWNER_REPO + r"/branches/(?P<branch>.+)", get_branch),
]


def match(method: str, path: str) -> tuple[Route, dict[str, str]] | None:
    for route in ROUTES:
        if route.method != method:
            continue
        found = route.pattern.fullmatch(path)
        if found:
            return route, {k: v for k, v in found.groupdict().items() if v is not None}
    return None
