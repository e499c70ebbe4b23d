"""``FakeGitHub``: the public face of the sandbox.

A test (or ``python -m app demo``) builds one, sets up installations, repositories, commits and
pull requests, starts it on 127.0.0.1, points the bot's ``GITHUB_API_URL`` at ``base_url`` and its
webhook URL at the bot, and then acts as the humans do (``request_review``, ``comment``,
``push``...). Everything the bot sends is recorded in ``calls``, checked by the installed
``Validator`` (problems land in ``problems``), and the webhooks GitHub would send back (with the
bot as sender for its own writes) are delivered after each answer, in order.
"""

from __future__ import annotations

import base64
import re
import secrets
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiohttp import web

from .actions import Actions, Emit
from .auth import TokenStore, generate_private_key_pem, public_key_pem
from .ci import CiActions
from .errors import ApiError
from .hooklog import HookLog
from .payloads import AppInfo, Shapes
from .ratelimits import Limiter, RateLimits
from .recording import Call, Validator
from .server import ENTERPRISE_GRAPHQL, ENTERPRISE_REST, WRITE_METHODS, Delay, Fault, Server
from .state import Installation, NotFound, Pull, Repo, World, node_id
from .webhooks import Attempt, Dispatcher, Outgoing

PERMISSION_BY_ASSOCIATION = {"OWNER": "admin", "MEMBER": "write", "COLLABORATOR": "write"}
MANIFEST_KEYS = frozenset(
    {
        "name",
        "url",
        "hook_attributes",
        "redirect_url",
        "callback_urls",
        "setup_url",
        "description",
        "public",
        "default_events",
        "default_permissions",
        "request_oauth_on_install",
        "setup_on_update",
    }
)
MANIFEST_CODE_LIFETIME = 3600.0  # GitHub: the code must be exchanged within an hour


class FakeGitHub:
    def __init__(
        self,
        *,
        app_id: int,
        app_slug: str,
        private_key_pem: str | None = None,
        webhook_secret: str,
        webhook_url: str | None = None,
        validator: Validator | None = None,
        token_lifetime: float = 3600.0,
        enterprise: bool = False,
        clock: Callable[[], float] = time.time,
        rate_limits: RateLimits | None = None,
        rate_clock: Callable[[], float] | None = None,
    ) -> None:
        """``rate_limits``: GitHub's unless lowered; ``rate_clock``: their windows' clock
        (monotonic seconds; real time unless a test injects one, see ``ratelimits.py``)."""
        self.app_id = app_id
        self.app_slug = app_slug
        self.private_key_pem: str = private_key_pem or generate_private_key_pem()
        self.public_key_pem: str = public_key_pem(self.private_key_pem)
        self.webhook_secret = webhook_secret
        self.webhook_url = webhook_url
        self.validator = validator
        self.base_url = "http://127.0.0.1:0"
        # As GitHub Enterprise Server: REST only under /api/v3, GraphQL only at /api/graphql (its
        # uploads host, /api/uploads, is not served: the bot uploads nothing), the web pages at
        # the root, and the URLs in answers say so. Otherwise (github.com) paths are taken with or
        # without that prefix.
        self.enterprise = enterprise
        self.calls: list[Call] = []
        self.problems: list[str] = []
        self.webhooks_sent: list[tuple[str, str, dict[str, Any], int]] = []
        self.tokens_issued: list[tuple[int, str, str]] = []
        self.hooks = HookLog()  # the App's webhook delivery log (GET /app/hook/deliveries)
        self.manifests: list[dict[str, Any]] = []  # manifests registered through the web flow
        self.manifest_returns_webhook_secret = True
        self._manifest_codes: dict[str, tuple[dict[str, Any], float]] = {}
        self.world = World(clock)  # the clock of GitHub's timestamps (not of tokens)
        self.shapes = Shapes(
            self.world,
            AppInfo(app_id, app_slug, f"{app_slug}-developer", self.world.iso()),
            self._base,
            api_url=lambda: self.api_url,
        )
        self.actions = Actions(self.world, self.shapes)
        self.ci = CiActions(self.world, self.shapes)
        self.tokens = TokenStore(token_lifetime)
        self.dispatcher = Dispatcher(
            secret=webhook_secret, url=lambda: self.webhook_url, app_id=app_id, record=self._record_delivery
        )
        self.world.user(self.bot_login, type="Bot")
        self._server = Server(self)
        if rate_limits is not None:
            self.limiter.limits = rate_limits
        if rate_clock is not None:
            self.limiter.clock = rate_clock
        self._runner: web.AppRunner | None = None

    @property
    def limiter(self) -> Limiter:
        """GitHub's rate limits as the fake enforces them: ``limits`` and ``clock`` may be
        replaced; ``refused`` lists every refusal."""
        return self._server.limiter

    # ---------------------------------------------------------------- identity and urls
    @property
    def bot_login(self) -> str:
        return f"{self.app_slug}[bot]"

    @property
    def api_url(self) -> str:
        """What the bot's ``GITHUB_API_URL`` is set to."""
        return f"{self.base_url}{ENTERPRISE_REST}" if self.enterprise else self.base_url

    @property
    def graphql_url(self) -> str:
        return f"{self.base_url}{ENTERPRISE_GRAPHQL}" if self.enterprise else f"{self.base_url}/graphql"

    def _base(self) -> str:
        return self.base_url

    # ---------------------------------------------------------------- lifecycle
    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        runner = web.AppRunner(self._server.application(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        self._runner = runner
        bound = runner.addresses[0][1] if runner.addresses else port
        self.base_url = f"http://{host}:{bound}"
        await self.dispatcher.start()
        return self.base_url

    async def stop(self) -> None:
        await self.dispatcher.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeGitHub:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    async def settle(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - a bound for tests and the demo
        """Wait until every queued webhook was delivered (and answered) by the bot."""
        await self.dispatcher.settle(timeout)

    # ---------------------------------------------------------------- recording
    def writes(self) -> list[Call]:
        """Calls that change something: REST writes (not token minting) and GraphQL mutations."""
        out: list[Call] = []
        for call in self.calls:
            if call.path == "/graphql":
                if call.is_graphql_mutation:
                    out.append(call)
                continue
            if call.method not in WRITE_METHODS:
                continue
            if call.method == "POST" and re.fullmatch(r"/app/installations/[^/]+/access_tokens", call.path):
                continue
            out.append(call)
        return out

    def _record_delivery(self, attempt: Attempt) -> None:
        item = attempt.item
        self.webhooks_sent.append((item.event, item.delivery_id, item.payload, attempt.status))
        if attempt.url is None:
            return  # no webhook URL configured: GitHub does not attempt anything
        self.hooks.add(
            guid=item.delivery_id,
            event=item.event,
            payload=item.payload,
            url=attempt.url,
            request_headers=attempt.request_headers,
            # GitHub logs an attempt that got no HTTP answer with 502 and its reason
            status_code=attempt.status or 502,
            error=attempt.error,
            duration=attempt.duration,
            response_headers=attempt.response_headers,
            response_body=attempt.response_body,
        )

    def set_webhook_secret(self, secret: str) -> None:
        self.webhook_secret = secret
        self.dispatcher.use_secret(secret)

    # ---------------------------------------------------------------- registering from a manifest
    def register_manifest(self, manifest: Any) -> str:
        """What GitHub does when someone submits the manifest form and confirms: check it, create
        the App (here: this fake's App takes its settings) and hand out a one-time code."""
        if not isinstance(manifest, dict):
            raise ApiError(422, "Manifest is not a JSON object")
        unknown = set(manifest) - MANIFEST_KEYS
        if unknown:
            raise ApiError(422, f"Unknown manifest keys: {', '.join(sorted(unknown))}")
        hook = manifest.get("hook_attributes")
        hook_url = str(hook.get("url", "")) if isinstance(hook, dict) else ""
        if not manifest.get("url") or not hook_url.startswith(("http://", "https://")):
            raise ApiError(422, "Manifest needs url and hook_attributes.url")
        code = secrets.token_hex(10)
        self._manifest_codes[code] = (manifest, time.time())
        return code

    def convert_manifest(self, code: str) -> dict[str, Any]:
        """``POST /app-manifests/{code}/conversions``: the App's credentials, once per code."""
        found = self._manifest_codes.pop(code, None)
        if found is None or time.time() - found[1] > MANIFEST_CODE_LIFETIME:
            raise ApiError(404, "Not Found")
        manifest = found[0]
        self.manifests.append(manifest)
        info = self.shapes.app_info
        info.permissions = {str(k): str(v) for k, v in (manifest.get("default_permissions") or {}).items()}
        info.events = [str(e) for e in manifest.get("default_events") or []]
        hook = manifest["hook_attributes"]
        self.webhook_url = str(hook["url"]) if hook.get("active", True) else None
        return {
            **self.shapes.app(),
            "name": str(manifest.get("name") or self.app_slug),
            "description": manifest.get("description"),
            "external_url": str(manifest["url"]),
            "client_id": f"Iv1.fake{self.app_id:08d}",
            "client_secret": secrets.token_hex(20),
            "webhook_secret": self.webhook_secret if self.manifest_returns_webhook_secret else None,
            "pem": self.private_key_pem,
        }

    # ---------------------------------------------------------------- faults, delays, tokens
    def fail_next(
        self,
        method: str,
        path_regex: str,
        *,
        status: int,
        headers: dict[str, str] | None = None,
        body: Any = None,
        times: int = 1,
    ) -> None:
        fault = Fault(method.upper(), re.compile(path_regex), status, dict(headers or {}), body, times)
        self._server.faults.append(fault)

    def delay(self, method: str, path_regex: str, seconds: float) -> None:
        self._server.delays.append(Delay(method.upper(), re.compile(path_regex), seconds))

    def clear_delays(self) -> None:
        self._server.delays.clear()

    def revoke_tokens(self) -> None:
        self.tokens.revoke_all()

    # ---------------------------------------------------------------- state setup
    def add_installation(self, installation_id: int, account: str) -> None:
        self.world.user(account)
        legacy_node_id = base64.b64encode(f"023:IntegrationInstallation{installation_id}".encode()).decode()
        self.world.installations[installation_id] = Installation(
            installation_id, account, legacy_node_id, self.world.iso()
        )

    def add_repo(
        self, full_name: str, *, installation_id: int, default_branch: str = "main", private: bool = False
    ) -> dict[str, Any]:
        if installation_id not in self.world.installations:
            raise ValueError(f"add_installation({installation_id}, ...) first")
        if "/" not in full_name:
            raise ValueError("full_name is owner/name")
        repo_id = self.world.new_id()
        repo = Repo(
            full_name=full_name,
            id=repo_id,
            node_id=node_id("R", repo_id),
            installation_id=installation_id,
            default_branch=default_branch,
            private=private,
            created_at=self.world.iso(),
        )
        self.world.repos[repo.key] = repo
        self.world.user(repo.owner)
        return self.shapes.repo(repo)

    def add_user(self, login: str, *, type: str = "User") -> dict[str, Any]:
        user = self.world.user(login, type=type)
        user.type = type
        return self.shapes.user(user)

    def add_commit(
        self,
        repo: str,
        files: dict[str, str | None],
        *,
        parent: str | None = None,
        message: str = "",
        author: str = "octocat",
        sha: str | None = None,
    ) -> str:
        return self.actions.add_commit(
            self.world.repo(repo), files, parent=parent, message=message, author=author, sha=sha
        )

    def set_branch(self, repo: str, branch: str, sha: str) -> None:
        found = self.world.repo(repo)
        self.world.commit(found, sha)
        found.branches[branch] = sha

    def set_dismissal_forbidden(self, repo: str, forbidden: bool = True) -> None:
        self.world.repo(repo).dismissal_forbidden = forbidden

    def set_permission(self, repo: str, login: str, permission: str) -> None:
        """What ``GET .../collaborators/{login}/permission`` answers: admin, write, read or none."""
        self.world.user(login)
        self.world.repo(repo).permissions[login.lower()] = permission

    def set_association(self, repo: str, login: str, association: str) -> None:
        """The ``author_association`` GitHub shows for this user's reviews and comments in ``repo``."""
        self.world.repo(repo).associations[login.lower()] = association

    def permission_of(self, repo: Repo, login: str) -> str:
        explicit = repo.permissions.get(login.lower())
        if explicit:
            return explicit
        association = self.actions.association(repo, login)
        return PERMISSION_BY_ASSOCIATION.get(association, "read")

    def open_pull(
        self,
        repo: str,
        *,
        head: str,
        base: str = "main",
        title: str = "A change",
        body: str | None = "",
        author: str = "octocat",
        draft: bool = False,
        author_association: str = "CONTRIBUTOR",
        notify: bool = False,
    ) -> dict[str, Any]:
        """Open a pull request between two existing branches.

        No webhook unless ``notify=True`` (then ``pull_request.opened`` is queued, sender the
        author); tests usually send ``pull_request_payload(..., "opened")`` themselves.
        """
        found = self.world.repo(repo)
        for branch in (head, base):
            if branch not in found.branches:
                raise ValueError(f"branch {branch!r} does not exist in {repo}; set_branch() first")
        number = self.world.take_number(found)
        pull_id, issue_id = self.world.new_id(), self.world.new_id()
        now = self.world.iso()
        pull = Pull(
            repo=found.key,
            number=number,
            id=pull_id,
            node_id=node_id("PR", pull_id),
            issue_id=issue_id,
            issue_node_id=node_id("I", issue_id),
            title=title,
            body=body,
            author=self.world.user(author).login,
            head_ref=head,
            base_ref=base,
            head_sha=found.branches[head],
            draft=draft,
            author_association=author_association,
            created_at=now,
            updated_at=now,
        )
        found.associations.setdefault(author.lower(), author_association)
        self.world.pulls[(found.key, number)] = pull
        if notify:
            self._queue([("pull_request", self.pull_request_payload(repo, number, "opened", sender=author))])
        return self.shapes.pull(pull)

    def push(self, repo: str, branch: str, files: Mapping[str, str | None], *, message: str = "") -> str:
        """Commit on top of ``branch`` (created from the default branch if new) and move it.

        Every open pull request with that head gets the new head sha and a queued
        ``pull_request.synchronize`` (sender: the PR author); ``settle()`` waits for them.
        """
        emitted: list[tuple[str, dict[str, Any]]] = []
        sha = self.actions.push(
            self.world.repo(repo), branch, files, message=message, emit=lambda e, p: emitted.append((e, p))
        )
        self._queue(emitted)
        return sha

    def push_commit(self, repo: str, branch: str, sha: str) -> None:
        """Move ``branch`` to the existing commit ``sha`` (``add_commit`` first), as a push of
        prepared commits or a force-push does; open pull requests get ``synchronize`` as in ``push``."""
        emitted: list[tuple[str, dict[str, Any]]] = []
        self.actions.move_branch(self.world.repo(repo), branch, sha, emit=lambda e, p: emitted.append((e, p)))
        self._queue(emitted)

    def review_decision(self, repo: str, number: int) -> str | None:
        found = self.world.repo(repo)
        return self.actions.review_decision(self.world.pull(found, number))

    # ---------------------------------------------------------------- webhooks
    def prepare_webhook(
        self, event: str, payload: dict[str, Any], delivery_id: str | None = None
    ) -> Outgoing:
        """Fill in ``installation``, validate, and wrap one delivery (not queued yet)."""
        if "installation" not in payload:
            repo_name = (payload.get("repository") or {}).get("full_name")
            try:
                repo = self.world.repo(str(repo_name)) if repo_name else None
            except NotFound:
                repo = None
            inst = self.world.installations.get(repo.installation_id) if repo else None
            if inst is not None:
                payload["installation"] = self.shapes.installation_lite(inst)
        if self.validator is not None:
            action = payload.get("action")
            label = f"{event}.{action}" if action else event
            self.problems.extend(f"webhook {label}: {p}" for p in self.validator.webhook(event, payload))
        return Outgoing(event, payload, delivery_id or str(uuid.uuid4()))

    def _queue(self, items: list[tuple[str, dict[str, Any]]]) -> None:
        for event, payload in items:
            self.dispatcher.enqueue(self.prepare_webhook(event, payload))

    async def _deliver_all(self, items: list[tuple[str, dict[str, Any]]]) -> int:
        """Queue deliveries and wait for the last; the bot's status for it (0 when none)."""
        status = 0
        for event, payload in items:
            status = await self.dispatcher.deliver(self.prepare_webhook(event, payload))
        return status

    async def send_webhook(
        self,
        event: str,
        payload: dict[str, Any],
        *,
        delivery_id: str | None = None,
        sender: str | None = None,
    ) -> int:
        """Sign and POST one delivery to ``webhook_url`` (after anything already queued)."""
        payload = dict(payload)
        if sender is not None:
            payload["sender"] = self.shapes.user(sender)
        return await self.dispatcher.deliver(self.prepare_webhook(event, payload, delivery_id))

    def pull_request_payload(
        self, repo: str, number: int, action: str, *, sender: str, **extra: Any
    ) -> dict[str, Any]:
        found = self.world.repo(repo)
        pull = self.world.pull(found, number)
        return self.shapes.envelope(
            action, found, sender, number=number, pull_request=self.shapes.pull(pull), **extra
        )

    def issue_comment_payload(
        self, repo: str, number: int, comment_id: int, action: str = "created", *, sender: str
    ) -> dict[str, Any]:
        found = self.world.repo(repo)
        pull = self.world.pull(found, number)
        comment = self.world.issue_comments[comment_id]
        return self.shapes.envelope(
            action, found, sender, issue=self.shapes.issue(pull), comment=self.shapes.issue_comment(comment)
        )

    # ---------------------------------------------------------------- acting as humans
    def _collector(self) -> tuple[list[tuple[str, dict[str, Any]]], Emit]:
        items: list[tuple[str, dict[str, Any]]] = []
        return items, lambda event, payload: items.append((event, payload))

    async def request_review(self, repo: str, number: int, reviewer: str, *, by: str) -> int:
        """``by`` requests a review from ``reviewer`` (a user; created if new); emits review_requested."""
        found = self.world.repo(repo)
        pull = self.world.pull(found, number)
        pull.requested_reviewers = [r for r in pull.requested_reviewers if r.lower() != reviewer.lower()]
        items, emit = self._collector()
        self.actions.request_reviewers(found, pull, by, [reviewer], [], emit, create_users=True)
        return await self._deliver_all(items)

    async def request_team_review(self, repo: str, number: int, team: str, *, by: str) -> int:
        """``by`` requests a review from team ``team`` (a slug); emits review_requested with
        ``requested_team``."""
        found = self.world.repo(repo)
        pull = self.world.pull(found, number)
        items, emit = self._collector()
        self.actions.request_reviewers(found, pull, by, [], [team], emit)
        return await self._deliver_all(items)

    async def comment(
        self, repo: str, number: int, body: str, *, by: str, author_association: str = "CONTRIBUTOR"
    ) -> dict[str, Any]:
        """``by`` writes a conversation comment on the PR; emits issue_comment.created."""
        found = self.world.repo(repo)
        pull = self.world.pull(found, number)
        items, emit = self._collector()
        created = self.actions.add_issue_comment(found, pull, by, body, emit, association=author_association)
        await self._deliver_all(items)
        return self.shapes.issue_comment(created)

    async def submit_review(
        self,
        repo: str,
        number: int,
        *,
        by: str,
        event: str | None,
        body: str = "",
        comments: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """``by`` submits a review, with GitHub's rules (an ``ApiError`` where GitHub says 422)."""
        found = self.world.repo(repo)
        pull = self.world.pull(found, number)
        items, emit = self._collector()
        review = self.actions.create_review(
            found, pull, by, body=body, event=event, comments=comments, commit_id=None, emit=emit
        )
        await self._deliver_all(items)
        return self.shapes.review(review)

    async def reply(self, repo: str, number: int, comment_id: int, body: str, *, by: str) -> dict[str, Any]:
        """``by`` replies in the thread of review comment ``comment_id``."""
        found = self.world.repo(repo)
        pull = self.world.pull(found, number)
        items, emit = self._collector()
        created = self.actions.reply(found, pull, comment_id, by, body, emit)
        await self._deliver_all(items)
        return self.shapes.review_comment(created)

    async def close_pull(self, repo: str, number: int, *, by: str, merged: bool = False) -> int:
        """``by`` closes (or merges) the PR; emits ``pull_request.closed``."""
        found = self.world.repo(repo)
        pull = self.world.pull(found, number)
        now = self.world.iso()
        pull.state, pull.merged, pull.closed_at = "closed", merged, now
        pull.merged_at = now if merged else None
        return await self._deliver_all(
            [("pull_request", self.pull_request_payload(repo, number, "closed", sender=by))]
        )

    async def resolve_thread(self, thread_id: str, *, by: str, resolved: bool = True) -> int:
        """``by`` resolves (or unresolves) a review thread; emits pull_request_review_thread."""
        items, emit = self._collector()
        self.actions.set_thread_resolved(self.world.threads[thread_id], by, resolved, emit)
        return await self._deliver_all(items)

    async def rerequest_check_run(self, repo: str, check_run_id: int, *, by: str) -> int:
        found = self.world.repo(repo)
        run = self.world.check_runs[check_run_id]
        items, emit = self._collector()
        self.actions.rerequest_check_run(found, run, by, emit)
        return await self._deliver_all(items)

    # ---------------------------------------------------------------- other integrations
    async def set_status(
        self, repo: str, sha: str, context: str, state: str, *, by: str = "ci-bot[bot]"
    ) -> int:
        """An integration sets a commit status; emits ``status``."""
        items, emit = self._collector()
        self.ci.set_status(self.world.repo(repo), sha, context, state, by, emit)
        return await self._deliver_all(items)

    async def start_check_run(self, repo: str, sha: str, name: str, *, app: str = "actions") -> int:
        """App ``app`` starts a check run on ``sha``; emits ``check_run.created``. Returns its id."""
        [run_id] = await self.start_check_runs(repo, sha, [name], app=app)
        return run_id

    async def start_check_runs(
        self, repo: str, sha: str, names: Sequence[str], *, app: str = "actions"
    ) -> list[int]:
        """App ``app`` starts several check runs on ``sha`` at once (a workflow's jobs): all exist
        before the first ``check_run.created`` is delivered. Returns their ids."""
        items, emit = self._collector()
        runs = [self.ci.start_check_run(self.world.repo(repo), sha, name, app, emit) for name in names]
        await self._deliver_all(items)
        return [run.id for run in runs]

    async def complete_check_run(self, repo: str, run_id: int, conclusion: str) -> int:
        """Its App completes a check run; emits ``check_run.completed`` (and ``check_suite.completed``
        when it was the suite's last)."""
        items, emit = self._collector()
        self.ci.complete_check_run(self.world.repo(repo), self.world.check_runs[run_id], conclusion, emit)
        return await self._deliver_all(items)

    def react_to_pull(self, repo: str, number: int, content: str, *, by: str) -> None:
        """``by`` reacts on the PR itself (GitHub sends no webhook for reactions)."""
        self.actions.react(self.world.repo(repo), ("issue", number), by, content)

    def set_conflicts(self, repo: str, number: int, conflicts: bool = True) -> None:
        """Whether merging the PR would conflict (GitHub's ``mergeable`` false, state ``dirty``)."""
        self.world.pull(self.world.repo(repo), number).conflicts = conflicts

    def set_mergeability_pending(self, repo: str, number: int) -> None:
        """GitHub has not computed mergeability yet: the next read of the PR answers null."""
        self.world.pull(self.world.repo(repo), number).mergeable_pending = True

    def protect_branch(
        self, repo: str, branch: str, *, contexts: Sequence[str], enforcement_level: str = "non_admins"
    ) -> None:
        """Classic branch protection requiring these status checks (from any App)."""
        self.world.repo(repo).protection[branch] = {
            "enforcement_level": enforcement_level,
            "contexts": list(contexts),
            "checks": [{"context": c, "app_id": None} for c in contexts],
        }

    def set_branch_rules(self, repo: str, rules: list[dict[str, Any]]) -> None:
        """The default branch's active rules (GitHub's ``repository-rule`` objects)."""
        self.world.repo(repo).rules = list(rules)

    # ---------------------------------------------------------------- inspection helpers
    def threads(self, repo: str, number: int) -> list[dict[str, Any]]:
        """Review threads of a PR: node id, resolved flag, and the comment ids in order."""
        found = self.world.repo(repo)
        pull = self.world.pull(found, number)
        return [
            {"id": t.node_id, "is_resolved": t.is_resolved, "comment_ids": list(t.comment_ids)}
            for t in self.world.threads_of(pull)
        ]
