"""The HTTP side: one aiohttp catch-all that runs every request through the same pipeline.

record the call -> configured delay -> request validation (the test's validator) -> injected
fault -> route -> authentication -> handler -> conditional GET (``ETag``/``Last-Modified``; 304,
not counted against the primary limit) -> GitHub's headers -> send the answer -> only then
queue the webhooks the write caused. Paths are taken with or without GHES's ``/api/v3`` prefix
(and ``/api/graphql``), and recorded without it; a fake made with ``enterprise=True`` answers
the API only there, as Enterprise Server does (anything else but its web pages is a 404).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from http import HTTPStatus
from typing import Any

from aiohttp import web
from yarl import URL

from .auth import AuthError, looks_like_jwt, split_authorization, verify_app_jwt
from .context import Ctx, Reply
from .errors import ApiError, not_found
from .gql import Executor
from .host import Host
from .ratelimits import Limiter, RateLimits, Resource
from .recording import Call
from .rest import match
from .webhooks import Outgoing

JSON_TYPE = "application/json; charset=utf-8"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The web page (not the API) a manifest form posts to, for a user or an organization.
NEW_APP_FORM = re.compile(r"(/organizations/[^/]+)?/settings/apps/new")


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    headers: dict[str, str]
    body: Any
    times: int


@dataclass
class Delay:
    method: str
    pattern: re.Pattern[str]
    seconds: float


def _method_matches(wanted: str, method: str) -> bool:
    return wanted in ("*", method)


ENTERPRISE_REST = "/api/v3"
ENTERPRISE_GRAPHQL = "/api/graphql"


def normalise_path(raw: str) -> str:
    if raw == ENTERPRISE_GRAPHQL:
        return "/graphql"
    if raw.startswith(ENTERPRISE_REST + "/") or raw == ENTERPRISE_REST:
        return raw[len(ENTERPRISE_REST) :] or "/"
    return raw


def enterprise_path(raw: str) -> str | None:
    """The API path of a request to an Enterprise Server, None when it is not an API address
    (GHES serves REST only under /api/v3 and GraphQL only at /api/graphql)."""
    if raw == ENTERPRISE_GRAPHQL or raw.startswith(ENTERPRISE_REST + "/"):
        return normalise_path(raw)
    return None


class Server:
    def __init__(self, fake: Host) -> None:
        self.fake = fake
        self.faults: list[Fault] = []
        self.delays: list[Delay] = []
        self.limiter = Limiter(RateLimits(), clock=time.monotonic, wall=time.time)
        # (identity, path with query) -> (ETag, Last-Modified in epoch seconds) of its current answer
        self._versions: dict[tuple[str, str], tuple[str, int]] = {}

    def application(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    # ---------------------------------------------------------------- pipeline
    async def handle(self, request: web.Request) -> web.StreamResponse:
        fake = self.fake
        method = request.method.upper()
        if method == "POST" and NEW_APP_FORM.fullmatch(request.path):
            return await self._new_app_form(request)  # a web page, at the root on every GitHub
        if fake.enterprise:
            found = enterprise_path(request.path)
            if found is None:
                fake.problems.append(f"{method} {request.path}: not an Enterprise Server API address")
                return web.json_response({"message": "Not Found"}, status=404)
            path = found
        else:
            path = normalise_path(request.path)
        query = {k: v for k, v in request.query.items()}
        raw = await request.read()
        body: Any = None
        bad_json = False
        if raw.strip():
            try:
                body = json.loads(raw)
            except ValueError:
                bad_json = True
                body = raw.decode("utf-8", "replace")
        authorization = split_authorization(request.headers.get("Authorization"))
        auth_kind: str | None = None
        token = None
        if authorization is not None:
            credential = authorization[1]
            auth_kind = "jwt" if authorization[0] == "bearer" and looks_like_jwt(credential) else "token"
            if auth_kind == "token":
                token = fake.tokens.find(credential)
        is_graphql = path == "/graphql" and method == "POST"
        call = Call(
            method=method,
            path=path,
            query=query,
            body=body,
            status=0,
            auth=auth_kind,
            installation_id=token.installation_id if token else None,
            graphql=str(body.get("query"))
            if is_graphql and isinstance(body, dict) and "query" in body
            else None,
            variables=body.get("variables") if is_graphql and isinstance(body, dict) else None,
            raw_path=request.path,
        )
        fake.calls.append(call)
        emitted: list[Outgoing] = []
        who = _identity(call)
        reply = await self._reply(request, call, who, emitted, bad_json=bad_json)
        if reply.status >= 400 and emitted:
            fake.dispatcher.release(len(emitted))
            emitted.clear()
        call.status = reply.status
        call.response = reply.body if reply.text is None else reply.text
        response = self._response(reply, call)
        try:
            await response.prepare(request)
            await response.write_eof()
        finally:
            for item in emitted:  # the answer is out: now the webhooks it caused may follow
                fake.dispatcher.enqueue(item, reserved=True)
        return response

    async def _reply(
        self, request: web.Request, call: Call, who: str, emitted: list[Outgoing], *, bad_json: bool
    ) -> Reply:
        """The answer within the caller's rate limits (a refusal when over them)."""
        refusal = self.limiter.begin(who, call.method, call.path, mutation=call.is_graphql_mutation)
        if refusal is not None:
            body = {"message": refusal.message, "documentation_url": refusal.documentation_url}
            reply = Reply(refusal.status, body, dict(refusal.headers))
        else:
            not_modified = False
            try:
                call.delayed = await self._delay(call.method, call.path)
                reply = self._conditional(
                    request, who, self._answer(request, call, emitted, bad_json=bad_json)
                )
                not_modified = reply.status == 304
            except ApiError as exc:
                reply = Reply(exc.status, exc.body(), dict(exc.headers))
            except Exception as exc:  # noqa: BLE001 - a bug in the fake must fail the test, not hang it
                self.fake.problems.append(f"{call.method} {request.raw_path}: the fake crashed: {exc!r}")
                reply = Reply(500, {"message": f"fake GitHub crashed: {exc!r}"})
            finally:
                # GitHub: a conditional request answered 304 does not count against the primary limit
                self.limiter.end(who, counted=not not_modified)
                call.counted = not not_modified
        return reply

    async def _new_app_form(self, request: web.Request) -> web.StreamResponse:
        """GitHub's web page for registering an App from a manifest (not the API): the person
        confirms, GitHub creates the App and sends the browser to ``redirect_url`` with a code."""
        form = await request.post()
        try:
            manifest = json.loads(str(form.get("manifest", "")))
            code = self.fake.register_manifest(manifest)
        except (ValueError, ApiError) as exc:
            return web.Response(status=422, text=f"Invalid GitHub App manifest: {exc}")
        target = URL(str(manifest.get("redirect_url") or ""))
        if not target.is_absolute():
            return web.Response(status=422, text="Invalid GitHub App manifest: redirect_url")
        query = {"code": code, **({"state": request.query["state"]} if "state" in request.query else {})}
        raise web.HTTPFound(target.update_query(query))

    async def _delay(self, method: str, path: str) -> float:
        """Hold the answer for the delays that match; the seconds held (recorded on the call)."""
        total = sum(
            d.seconds for d in self.delays if _method_matches(d.method, method) and d.pattern.fullmatch(path)
        )
        if total > 0:
            await asyncio.sleep(total)
        return total

    def _take_fault(self, method: str, path: str) -> Fault | None:
        for fault in self.faults:
            if _method_matches(fault.method, method) and fault.pattern.fullmatch(path):
                fault.times -= 1
                if fault.times <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    def _answer(self, request: web.Request, call: Call, emitted: list[Outgoing], *, bad_json: bool) -> Reply:
        fake = self.fake
        path_with_query = request.raw_path
        problems: list[str] = []
        if fake.validator is not None and not bad_json:
            if call.path == "/graphql" and call.method == "POST":
                if call.graphql is not None:
                    variables = call.variables if isinstance(call.variables, dict) else None
                    problems = fake.validator.graphql(call.graphql, variables)
            else:
                problems = fake.validator.request(call.method, path_with_query, call.body)
        if problems:
            fake.problems.extend(f"{call.method} {path_with_query}: {p}" for p in problems)
            return Reply(
                422, {"message": "Invalid request.", "errors": list(problems), "documentation_url": ""}
            )
        fault = self._take_fault(call.method, call.path)
        if fault is not None:
            body = fault.body
            if body is None and fault.status not in (204, 304):
                body = {"message": _reason(fault.status), "documentation_url": "https://docs.github.com/rest"}
            return Reply(fault.status, body, dict(fault.headers))
        if bad_json:
            raise ApiError(400, "Problems parsing JSON")
        if call.path == "/graphql":
            if call.method != "POST":
                raise not_found()
            return self._graphql(request, call, emitted)
        found = match(call.method, call.path)
        if found is None:
            raise not_found()
        route, params = found
        installation_id, actor = self._authenticate(request, route.auth)
        ctx = self._ctx(request, call, params, installation_id, actor, emitted)
        return route.handler(ctx)

    def _authenticate(self, request: web.Request, wanted: str) -> tuple[int | None, str]:
        fake = self.fake
        if wanted == "none":
            return None, ""
        authorization = split_authorization(request.headers.get("Authorization"))
        if wanted == "jwt":
            if authorization is None or authorization[0] != "bearer":
                raise ApiError(401, "A JSON web token could not be decoded")
            try:
                verify_app_jwt(authorization[1], fake.public_key_pem, fake.app_id)
            except AuthError as exc:
                raise ApiError(401, exc.message) from None
            return None, fake.bot_login
        if authorization is None:
            raise ApiError(401, "Requires authentication")
        if looks_like_jwt(authorization[1]):
            raise ApiError(401, "Bad credentials")
        try:
            token = fake.tokens.check(authorization[1])
        except AuthError as exc:
            raise ApiError(401, exc.message) from None
        return token.installation_id, fake.bot_login

    def _ctx(
        self,
        request: web.Request,
        call: Call,
        params: dict[str, str],
        installation_id: int | None,
        actor: str,
        emitted: list[Outgoing],
    ) -> Ctx:
        def emit(event: str, payload: dict[str, Any]) -> None:
            emitted.append(self.fake.prepare_webhook(event, payload))
            self.fake.dispatcher.reserve()

        return Ctx(
            fake=self.fake,
            method=call.method,
            path=call.path,
            url=request.url,
            params=params,
            query=call.query,
            body=call.body,
            headers={k.lower(): v for k, v in request.headers.items()},
            installation_id=installation_id,
            actor=actor,
            emit=emit,
        )

    def _graphql(self, request: web.Request, call: Call, emitted: list[Outgoing]) -> Reply:
        installation_id, actor = self._authenticate(request, "token")
        assert installation_id is not None
        body = call.body if isinstance(call.body, dict) else {}
        if call.graphql is None:
            raise ApiError(400, "A query attribute must be specified and must be a string.")
        ctx = self._ctx(request, call, {}, installation_id, actor, emitted)
        executor = Executor(
            self.fake.world, self.fake.actions, installation_id=installation_id, actor=actor, emit=ctx.emit
        )
        operation_name = body.get("operationName")
        outcome = executor.run(
            call.graphql,
            call.variables if isinstance(call.variables, dict) else None,
            operation_name if isinstance(operation_name, str) else None,
        )
        if outcome.problems:
            self.fake.problems.extend(f"POST /graphql: {p}" for p in outcome.problems)
        return Reply(200, outcome.body)

    # ---------------------------------------------------------------- answer
    def _conditional(self, request: web.Request, who: str, reply: Reply) -> Reply:
        """GitHub's conditional requests: a JSON answer to a GET carries an ``ETag`` (a digest of
        its body) and ``Last-Modified`` (when that body was first served at that address, strictly
        later for each change); ``If-None-Match`` naming the current ETag, or, without it,
        ``If-Modified-Since`` not before ``Last-Modified``, is answered 304 with no body."""
        if (
            request.method.upper() != "GET"
            or reply.status != 200
            or reply.text is not None
            or reply.body is None
        ):
            return reply
        encoded = json.dumps(reply.body, sort_keys=True).encode()
        etag = 'W/"' + hashlib.sha256(encoded).hexdigest()[:40] + '"'
        key = (who, request.raw_path)
        seen = self._versions.get(key)
        if seen is None or seen[0] != etag:
            modified = int(time.time()) if seen is None else max(int(time.time()), seen[1] + 1)
            seen = self._versions[key] = (etag, modified)
        headers = {
            **reply.headers,
            "ETag": etag,
            "Last-Modified": format_datetime(datetime.fromtimestamp(seen[1], UTC), usegmt=True),
        }
        if _unchanged(request.headers.get("If-None-Match"), request.headers.get("If-Modified-Since"), seen):
            return Reply(304, None, headers)
        return Reply(reply.status, reply.body, headers, content_type=reply.content_type)

    def _response(self, reply: Reply, call: Call) -> web.Response:
        resource = Resource.GRAPHQL if call.path == "/graphql" else Resource.CORE
        headers = {
            **self.limiter.headers(_identity(call), resource),
            "X-GitHub-Media-Type": "github.v3; format=json",
            "X-GitHub-Api-Version-Selected": "2022-11-28",
            "X-GitHub-Request-Id": uuid.uuid4().hex[:20].upper(),
        }
        headers.update(reply.headers)
        if reply.text is not None:
            return web.Response(
                status=reply.status,
                body=reply.text.encode("utf-8"),
                headers={**headers, "Content-Type": reply.content_type or "text/plain; charset=utf-8"},
            )
        if reply.body is None:
            return web.Response(status=reply.status, headers=headers)
        data = json.dumps(reply.body).encode()
        return web.Response(status=reply.status, body=data, headers={**headers, "Content-Type": JSON_TYPE})


def _identity(call: Call) -> str:
    """Whose limits a request counts against (the words of GitHub's primary-limit message)."""
    if call.installation_id is not None:
        return f"installation ID {call.installation_id}"
    return "the App" if call.auth == "jwt" else "anonymous"


def _unchanged(if_none_match: str | None, if_modified_since: str | None, current: tuple[str, int]) -> bool:
    """RFC 9110 13.2.2: If-None-Match decides when present (weak comparison); else If-Modified-Since."""
    etag, modified = current
    if if_none_match is not None:
        tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
        return "*" in tags or etag.removeprefix("W/") in tags
    if if_modified_since is None:
        return False
    try:
        since = parsedate_to_datetime(if_modified_since).timestamp()
    except (TypeError, ValueError):
        return False  # an unreadable date is ignored, as HTTP says
    return modified <= since


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"
