"""The fake GitHub itself, driven over real HTTP (aiohttp and gidgethub, as the bot drives it).

Every test runs with ``GitHubConformance`` installed, and the ``fake`` fixture's teardown checks
that nothing the tests sent was flagged and that every answer the fake gave fits the schema
GitHub documents for it: the fake is held to GitHub's descriptions, not to our assumptions.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import gidgethub
import gidgethub.aiohttp
import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from app.events import (
    CheckRunEvent,
    IssueCommentEvent,
    PullRequestEvent,
    ReviewCommentEvent,
    ReviewEvent,
    flatten,
)
from app.guards import BotIdentity, sent_by_bot_or_decoy
from app.sandbox import Call, FakeGitHub
from app.sandbox.ratelimits import Cost, Limiter, RateLimits, Resource, cost_of
from tests.conformance import (
    GitHubConformance,
    validate_graphql,
    validate_request,
    validate_response,
    validate_webhook,
)

APP_ID = 4242
SLUG = "revbot-test"
BOT = f"{SLUG}[bot]"
SECRET = "webhook-secret"
REPO = "octo/repo"
IDENTITY = BotIdentity.from_slug(SLUG)

APP_PY = "".join(f"line {i}\n" for i in range(1, 31))
APP_PY_NEW = APP_PY.replace("line 10\n", "line ten\n") + "line 31\nline 32\n"

THREADS_QUERY = """
query Threads($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 1, after: $after) {
        pageInfo { hasNextPage endCursor }
        nodes {
          id isResolved path line
          comments(first: 20) { nodes { databaseId body author { __typename login } } }
        }
      }
    }
  }
}
"""
RESOLVE = (
    "mutation Resolve($id: ID!) { resolveReviewThread(input: {threadId: $id}) { thread { id isResolved } } }"
)


@contextlib.contextmanager
def rejected(status: int = 422) -> Iterator[None]:
    """The block's request is answered with ``status`` (gidgethub raises for any 4xx)."""
    with pytest.raises(gidgethub.BadRequest) as caught:
        yield
    assert caught.value.status_code == status


def _private_key() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@pytest.fixture(scope="session")
def private_key() -> str:
    return _private_key()


@pytest.fixture(scope="session")
def other_key() -> str:
    return _private_key()


def app_jwt(key: str, *, iat: float | None = None, lifetime: int = 540, iss: Any = str(APP_ID)) -> str:
    """An App JWT; signed at the JWS layer so a numeric ``iss`` (which GitHub accepts) is possible."""
    issued = int(time.time() - 60 if iat is None else iat)
    claims = json.dumps({"iat": issued, "exp": issued + lifetime, "iss": iss}).encode()
    return jwt.api_jws.encode(claims, key, algorithm="RS256")


# ----------------------------------------------------------------------------------- receiver
@dataclass
class Receiver:
    """Stands in for the bot's webhook endpoint: checks signatures, records deliveries."""

    status: int = 202
    deliveries: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    bad_signatures: int = 0
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, request.headers.get("X-Hub-Signature-256", "")):
            self.bad_signatures += 1
            return web.Response(status=401)
        self.headers.append(dict(request.headers))
        self.deliveries.append(
            (request.headers["X-GitHub-Event"], request.headers["X-GitHub-Delivery"], json.loads(body))
        )
        return web.Response(status=self.status)

    def events(self) -> list[str]:
        return [f"{event}.{payload.get('action')}" for event, _, payload in self.deliveries]


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rec = Receiver()
    app = web.Application()
    app.router.add_post("/api/github/webhooks", rec.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    rec.url = f"http://127.0.0.1:{runner.addresses[0][1]}/api/github/webhooks"
    yield rec
    await runner.cleanup()


# ----------------------------------------------------------------------------------- the fake
def build_world(fake: FakeGitHub) -> dict[str, str]:
    fake.add_installation(7, "octo")
    fake.add_installation(8, "other")
    fake.add_repo(REPO, installation_id=7)
    fake.add_repo("other/secret", installation_id=8, private=True)
    base = fake.add_commit(
        REPO,
        {"src/app.py": APP_PY, "README.md": "# Repo\n", "old.txt": "bye\n", "logo.png": "\x89PNG\0\x01"},
        message="Initial",
    )
    fake.set_branch(REPO, "main", base)
    fake.set_branch(REPO, "feat", base)
    head = fake.push(
        REPO,
        "feat",
        {
            "src/app.py": APP_PY_NEW,
            "src/new.py": "def f():\n    return 1\n",
            "old.txt": None,
            "README.md": None,
            "docs/README.md": "# Repo\n",
            "logo.png": "\x89PNG\0\x02",
        },
        message="Change things",
    )
    fake.open_pull(REPO, head="feat", author="alice", title="Change things")
    fake.add_user("bob")
    fake.add_user("carol")
    other = fake.add_commit("other/secret", {"x": "1\n"})
    fake.set_branch("other/secret", "main", other)
    return {"base": base, "head": head}


@pytest.fixture
async def fake(private_key: str, receiver: Receiver) -> AsyncIterator[FakeGitHub]:
    hub = FakeGitHub(
        app_id=APP_ID,
        app_slug=SLUG,
        private_key_pem=private_key,
        webhook_secret=SECRET,
        webhook_url=receiver.url,
        validator=GitHubConformance(),
    )
    build_world(hub)
    await hub.start()
    try:
        yield hub
        await hub.settle()
        assert hub.problems == []
        assert receiver.bad_signatures == 0
        answers = [problem for call in hub.calls for problem in answer_problems(call)]
        assert answers == []
    finally:
        await hub.stop()


def answer_problems(call: Call) -> list[str]:
    """The fake's answer to a REST call against GitHub's documented response schema."""
    if call.path == "/graphql" or call.status == 0 or isinstance(call.response, str):
        return []
    strict = 200 <= call.status < 300
    problems = validate_response(call.method, call.path, call.status, call.response, strict_status=strict)
    return [f"{call.method} {call.path} -> {call.status}: {p}" for p in problems]


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


async def mint(fake: FakeGitHub, session: aiohttp.ClientSession, installation_id: int = 7) -> str:
    gh = gidgethub.aiohttp.GitHubAPI(session, "revbot-tests", base_url=fake.base_url)
    data = await gh.post(
        f"/app/installations/{installation_id}/access_tokens", data={}, jwt=app_jwt(fake.private_key_pem)
    )
    return str(data["token"])


@pytest.fixture
async def gh(fake: FakeGitHub, session: aiohttp.ClientSession) -> gidgethub.aiohttp.GitHubAPI:
    token = await mint(fake, session)
    return gidgethub.aiohttp.GitHubAPI(session, "revbot-tests", oauth_token=token, base_url=fake.base_url)


async def raw(
    session: aiohttp.ClientSession, method: str, url: str, *, auth: str | None = None, body: Any = None
) -> tuple[int, Any, Any]:
    headers = {"Authorization": auth} if auth else {}
    async with session.request(method, url, json=body, headers=headers) as response:
        text = await response.text()
        return response.status, json.loads(text) if text else None, response.headers


async def graphql(gh: gidgethub.aiohttp.GitHubAPI, fake: FakeGitHub, query: str, **variables: Any) -> Any:
    return await gh.graphql(query, endpoint=fake.graphql_url, **variables)


PULL = f"/repos/{REPO}/pulls/1"


async def review(gh: gidgethub.aiohttp.GitHubAPI, event: str | None, body: str = "", **extra: Any) -> Any:
    data: dict[str, Any] = {"body": body, **extra}
    if event is not None:
        data["event"] = event
    return await gh.post(f"{PULL}/reviews", data=data)


# ======================================================================================== auth
@pytest.mark.slow
async def test_app_jwt_is_accepted(fake: FakeGitHub, session: aiohttp.ClientSession) -> None:
    gh = gidgethub.aiohttp.GitHubAPI(session, "revbot-tests", base_url=fake.base_url)
    app = await gh.getitem("/app", jwt=app_jwt(fake.private_key_pem))
    assert (app["id"], app["slug"]) == (APP_ID, SLUG)
    numeric_iss = await gh.getitem("/app", jwt=app_jwt(fake.private_key_pem, iss=APP_ID))
    assert numeric_iss["slug"] == SLUG
    installs = await gh.getitem("/app/installations", jwt=app_jwt(fake.private_key_pem))
    assert sorted(i["id"] for i in installs) == [7, 8]
    assert fake.calls[0].auth == "jwt" and fake.calls[0].path == "/app"


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    ["expired", "too_long_lived", "issued_in_future", "wrong_key", "wrong_issuer", "missing", "garbage"],
)
async def test_app_jwt_is_rejected(
    fake: FakeGitHub, session: aiohttp.ClientSession, other_key: str, case: str
) -> None:
    key = fake.private_key_pem
    now = time.time()
    tokens = {
        "expired": app_jwt(key, iat=now - 700, lifetime=600),
        "too_long_lived": app_jwt(key, iat=now - 30, lifetime=601),
        "issued_in_future": app_jwt(key, iat=now + 120, lifetime=300),
        "wrong_key": app_jwt(other_key),
        "wrong_issuer": app_jwt(key, iss="999"),
        "missing": None,
        "garbage": "not.a.jwt",
    }
    token = tokens[case]
    auth = f"Bearer {token}" if token else None
    for method, path in (("GET", "/app"), ("POST", "/app/installations/7/access_tokens")):
        status, body, _ = await raw(session, method, fake.base_url + path, auth=auth)
        assert status == 401, (case, path)
        assert isinstance(body["message"], str) and body["message"]
    assert fake.tokens_issued == []


@pytest.mark.slow
async def test_installation_token_flow(fake: FakeGitHub, session: aiohttp.ClientSession) -> None:
    token = await mint(fake, session)
    assert token.startswith("ghs_") and len(token) == 40
    assert fake.tokens_issued[0][:2] == (7, token)
    assert fake.tokens_issued[0][2].endswith("Z")
    gh = gidgethub.aiohttp.GitHubAPI(session, "revbot-tests", oauth_token=token, base_url=fake.base_url)
    repo = await gh.getitem(f"/repos/{REPO}")
    assert repo["full_name"] == REPO and repo["default_branch"] == "main"
    call = fake.calls[-1]
    assert (call.auth, call.installation_id, call.status) == ("token", 7, 200)
    # "Bearer <installation token>" works as well as "token <...>"
    status, _, _ = await raw(session, "GET", f"{fake.base_url}/repos/{REPO}", auth=f"Bearer {token}")
    assert status == 200
    # another installation's repository does not exist for this token
    status, body, _ = await raw(session, "GET", f"{fake.base_url}/repos/other/secret", auth=f"token {token}")
    assert (status, body["message"]) == (404, "Not Found")
    # an unknown installation, an unknown token, no token, a JWT where a token belongs
    status, _, _ = await raw(
        session,
        "POST",
        f"{fake.base_url}/app/installations/99/access_tokens",
        auth=f"Bearer {app_jwt(fake.private_key_pem)}",
    )
    assert status == 404
    for auth in ("token ghs_unknown", None, f"Bearer {app_jwt(fake.private_key_pem)}"):
        status, body, _ = await raw(session, "GET", f"{fake.base_url}/repos/{REPO}", auth=auth)
        assert status == 401, auth


@pytest.mark.slow
async def test_revoked_and_expired_tokens(
    fake: FakeGitHub, session: aiohttp.ClientSession, private_key: str
) -> None:
    token = await mint(fake, session)
    url = f"{fake.base_url}/repos/{REPO}/pulls/1"
    assert (await raw(session, "GET", url, auth=f"token {token}"))[0] == 200
    fake.revoke_tokens()
    status, body, _ = await raw(session, "GET", url, auth=f"token {token}")
    assert (status, body["message"]) == (401, "Bad credentials")
    fresh = await mint(fake, session)
    assert (await raw(session, "GET", url, auth=f"token {fresh}"))[0] == 200

    short = FakeGitHub(
        app_id=APP_ID, app_slug=SLUG, private_key_pem=private_key, webhook_secret=SECRET, token_lifetime=60
    )
    build_world(short)
    await short.start()
    try:
        token = await mint(short, session)
        assert (await raw(session, "GET", f"{short.base_url}/repos/{REPO}", auth=f"token {token}"))[0] == 200
        issued_clock = short.tokens.clock
        short.tokens.clock = lambda: issued_clock() + 61  # past the token's lifetime, without waiting
        assert (await raw(session, "GET", f"{short.base_url}/repos/{REPO}", auth=f"token {token}"))[0] == 401
    finally:
        await short.stop()


@pytest.mark.slow
async def test_generated_key_when_none_given(session: aiohttp.ClientSession) -> None:
    hub = FakeGitHub(app_id=1, app_slug="x", webhook_secret=SECRET)
    assert hub.private_key_pem.startswith("-----BEGIN PRIVATE KEY-----")
    await hub.start()
    try:
        gh = gidgethub.aiohttp.GitHubAPI(session, "t", base_url=hub.base_url)
        token = jwt.encode(
            {"iat": int(time.time()) - 60, "exp": int(time.time()) + 500, "iss": "1"},
            hub.private_key_pem,
            algorithm="RS256",
        )
        assert (await gh.getitem("/app", jwt=token))["slug"] == "x"
    finally:
        await hub.stop()


# =========================================================================== faults and delays
async def test_fault_injection_and_recording(fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI) -> None:
    fake.fail_next("GET", r"/repos/[^/]+/[^/]+/pulls/\d+", status=502, times=2)
    fake.fail_next(
        "POST", r".*/reviews", status=403, headers={"Retry-After": "7"}, body={"message": "slow down"}
    )
    for _ in range(2):
        with pytest.raises(gidgethub.GitHubBroken):
            await gh.getitem(PULL)
    assert (await gh.getitem(PULL))["number"] == 1
    with pytest.raises(gidgethub.BadRequest) as caught:
        await review(gh, "COMMENT", "hello")
    assert caught.value.status_code == 403 and caught.value.headers["Retry-After"] == "7"
    assert str(caught.value) == "slow down"
    await fake.settle()
    assert [(c.method, c.status) for c in fake.calls[-4:]] == [
        ("GET", 502),
        ("GET", 502),
        ("GET", 200),
        ("POST", 403),
    ]
    assert fake.calls[-1].body == {"body": "hello", "event": "COMMENT"}
    assert fake.writes()[-1].status == 403
    assert fake.webhooks_sent == []  # the faulted review never happened


@pytest.mark.slow
async def test_delay_and_headers(
    fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI, session: aiohttp.ClientSession
) -> None:
    fake.delay("GET", rf"/repos/{REPO}", 0.2)
    started = time.perf_counter()
    await gh.getitem(f"/repos/{REPO}")
    assert time.perf_counter() - started >= 0.2
    assert fake.calls[-1].delayed == 0.2
    fake.clear_delays()
    token = await mint(fake, session)
    status, _, headers = await raw(session, "GET", f"{fake.base_url}/repos/{REPO}", auth=f"token {token}")
    # held no longer (recorded, not timed: a loaded machine may answer slowly without a delay)
    assert status == 200 and fake.calls[-1].delayed == 0
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    assert {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} <= set(headers)
    assert int(headers["X-RateLimit-Remaining"]) < int(headers["X-RateLimit-Limit"])


@pytest.mark.slow
async def test_ghes_prefix_is_served_and_stripped(fake: FakeGitHub, session: aiohttp.ClientSession) -> None:
    token = await mint(fake, session)
    gh = gidgethub.aiohttp.GitHubAPI(session, "t", oauth_token=token, base_url=fake.base_url + "/api/v3")
    assert (await gh.getitem(f"/repos/{REPO}/pulls/1"))["number"] == 1
    assert fake.calls[-1].path == f"/repos/{REPO}/pulls/1"
    data = await gh.graphql(
        THREADS_QUERY, endpoint=fake.base_url + "/api/graphql", owner="octo", name="repo", number=1
    )
    assert data["repository"]["pullRequest"]["reviewThreads"]["nodes"] == []
    assert fake.calls[-1].path == "/graphql"


# ======================================================================== pulls, files, contents
async def test_pull_and_files(fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI) -> None:
    pull = await gh.getitem(PULL)
    assert pull["head"]["ref"] == "feat" and pull["base"]["ref"] == "main"
    assert pull["user"]["login"] == "alice" and pull["draft"] is False and pull["merged"] is False
    files = {f["filename"]: f for f in await gh.getitem(f"{PULL}/files")}
    assert set(files) == {"src/app.py", "src/new.py", "old.txt", "docs/README.md", "logo.png"}
    app = files["src/app.py"]
    assert app["status"] == "modified" and (app["additions"], app["deletions"]) == (3, 1)
    assert app["patch"].startswith("@@ -7,7 +7,7 @@\n line 7\n") and "-line 10\n+line ten" in app["patch"]
    assert "@@ -28,3 +28,5 @@" in app["patch"]
    assert (
        files["src/new.py"]["status"] == "added"
        and files["src/new.py"]["patch"] == "@@ -0,0 +1,2 @@\n+def f():\n+    return 1"
    )
    assert files["old.txt"]["status"] == "removed"
    assert files["docs/README.md"]["status"] == "renamed"
    assert files["docs/README.md"]["previous_filename"] == "README.md"
    assert "patch" not in files["logo.png"]  # binary
    assert (pull["changed_files"], pull["additions"], pull["deletions"]) == (5, 5, 2)
    # OpenAPI ``nullable``: a null body is a pull request GitHub could send, a null title is not
    assert validate_response("GET", PULL, 200, {**pull, "body": None}) == []
    assert validate_response("GET", PULL, 200, {**pull, "title": None}) != []


@pytest.mark.slow
async def test_files_pagination_250(
    fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI, session: aiohttp.ClientSession
) -> None:
    base = fake.world.repo(REPO).branches["main"]
    fake.set_branch(REPO, "many", base)
    fake.push(REPO, "many", {f"f/{i:03}.txt": f"{i}\n" for i in range(250)})
    fake.open_pull(REPO, head="many", author="alice")
    token = await mint(fake, session)
    url = f"{fake.base_url}/repos/{REPO}/pulls/2/files?per_page=100"
    status, page1, headers = await raw(session, "GET", url, auth=f"token {token}")
    assert status == 200 and len(page1) == 100
    assert (
        'rel="next"' in headers["Link"]
        and "page=2" in headers["Link"]
        and 'page=3>; rel="last"' in headers["Link"]
    )
    status, page3, headers = await raw(session, "GET", url + "&page=3", auth=f"token {token}")
    assert len(page3) == 50 and 'rel="next"' not in headers["Link"] and 'rel="first"' in headers["Link"]
    everything = [f["filename"] async for f in gh.getiter(f"/repos/{REPO}/pulls/2/files?per_page=100")]
    assert everything == [f"f/{i:03}.txt" for i in range(250)]
    status, page, headers = await raw(
        session, "GET", url.replace("per_page=100", "per_page=500"), auth=f"token {token}"
    )
    assert len(page) == 100  # per_page is capped at 100
    assert len(await gh.getitem(f"/repos/{REPO}/pulls/2/files")) == 30  # the default page size


async def test_huge_patch_is_omitted(fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI) -> None:
    base = fake.world.repo(REPO).branches["main"]
    fake.set_branch(REPO, "huge", base)
    fake.push(REPO, "huge", {"big.txt": "".join(f"{i}\n" for i in range(3500))})
    fake.open_pull(REPO, head="huge", author="alice")
    (entry,) = await gh.getitem(f"/repos/{REPO}/pulls/2/files")
    assert entry["additions"] == 3500 and "patch" not in entry
    with rejected():
        await gh.post(
            f"/repos/{REPO}/pulls/2/reviews",
            data={"event": "COMMENT", "comments": [{"path": "big.txt", "line": 1, "body": "x"}]},
        )


async def test_contents(
    fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI, session: aiohttp.ClientSession
) -> None:
    data = await gh.getitem(f"/repos/{REPO}/contents/src/app.py?ref=feat")
    assert data["encoding"] == "base64" and base64.b64decode(data["content"]).decode() == APP_PY_NEW
    main = await gh.getitem(f"/repos/{REPO}/contents/src/app.py")
    assert base64.b64decode(main["content"]).decode() == APP_PY
    listing = await gh.getitem(f"/repos/{REPO}/contents/src?ref=feat")
    assert [(e["name"], e["type"]) for e in listing] == [("app.py", "file"), ("new.py", "file")]
    with pytest.raises(gidgethub.BadRequest) as caught:
        await gh.getitem(f"/repos/{REPO}/contents/.github/{SLUG}.yml")
    assert caught.value.status_code == 404
    text = await gh.getitem(
        f"/repos/{REPO}/contents/src/new.py?ref=feat", accept="application/vnd.github.raw+json"
    )
    assert text == "def f():\n    return 1\n"


# ================================================================================== reviews
@pytest.mark.slow
async def test_review_line_outside_diff_is_422(fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI) -> None:
    comments = [
        {"path": "src/app.py", "line": 10, "side": "RIGHT", "body": "inside the hunk"},
        {"path": "src/app.py", "line": 20, "side": "RIGHT", "body": "outside every hunk"},
    ]
    with pytest.raises(gidgethub.BadRequest) as caught:
        await review(gh, "COMMENT", "two notes", comments=comments)
    assert caught.value.status_code == 422
    assert fake.calls[-1].response["errors"] == ["Line could not be resolved"]
    assert fake.world.reviews == {} and fake.world.review_comments == {}
    # LEFT lines are the old file's numbers, and the deleted line is commentable there
    ok = await review(
        gh, "COMMENT", "", comments=[{"path": "src/app.py", "line": 10, "side": "LEFT", "body": "was"}]
    )
    assert ok["state"] == "COMMENTED"
    multi = {"path": "src/app.py", "start_line": 8, "line": 10, "body": "range"}
    assert (await review(gh, "COMMENT", "", comments=[multi]))["state"] == "COMMENTED"
    ranged = [c for c in await gh.getitem(f"{PULL}/comments") if c["start_line"] is not None]
    assert [(c["start_line"], c["start_side"], c["line"], c["side"]) for c in ranged] == [
        (8, "RIGHT", 10, "RIGHT")
    ]
    with rejected():  # a range must stay inside one hunk
        await review(
            gh, "COMMENT", "", comments=[{"path": "src/app.py", "start_line": 10, "line": 30, "body": "x"}]
        )


async def test_review_rules(fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI) -> None:
    with rejected():
        await review(gh, "REQUEST_CHANGES", "")
    with rejected():
        await review(gh, "COMMENT", "   ")
    pending = await review(gh, None, "draft thoughts")
    assert pending["state"] == "PENDING" and "submitted_at" not in pending
    with rejected():
        await review(gh, None, "a second pending review")
    # the App's own pull request cannot be approved by the App
    fake.set_branch(REPO, "bot-branch", fake.world.repo(REPO).branches["feat"])
    fake.open_pull(REPO, head="bot-branch", author=BOT)
    with rejected():
        await gh.post(f"/repos/{REPO}/pulls/2/reviews", data={"event": "APPROVE"})
    with rejected():
        await gh.post(f"/repos/{REPO}/pulls/2/reviews", data={"event": "REQUEST_CHANGES", "body": "no"})
    await fake.settle()
    assert fake.webhooks_sent == []  # nothing was submitted


@pytest.mark.slow
async def test_review_webhooks_validate_and_flatten(
    fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI, receiver: Receiver
) -> None:
    submitted = await review(
        gh,
        "REQUEST_CHANGES",
        "Please fix",
        comments=[
            {"path": "src/app.py", "line": 10, "body": "typo?"},
            {"path": "src/new.py", "line": 2, "body": "1?"},
        ],
    )
    assert submitted["state"] == "CHANGES_REQUESTED" and submitted["user"]["login"] == BOT
    await fake.settle()
    assert receiver.events() == [
        "pull_request_review.submitted",
        "pull_request_review_comment.created",
        "pull_request_review_comment.created",
    ]
    assert [status for *_, status in fake.webhooks_sent] == [202, 202, 202]
    for event, delivery_id, payload, _ in fake.webhooks_sent:
        assert validate_webhook(event, payload) == []
        flat = flatten(event, payload, delivery_id=delivery_id)
        assert (
            sent_by_bot_or_decoy(flat.sender_login, IDENTITY)
            and flat.sender_login == BOT
            and payload["sender"]["type"] == "Bot"
        )
        assert flat.installation_id == 7 and flat.repo == REPO
    hook = flatten("pull_request_review", fake.webhooks_sent[0][2])
    assert isinstance(hook, ReviewEvent) and hook.reviewer_login == BOT
    assert fake.webhooks_sent[0][2]["review"]["state"] == "changes_requested"
    flat_comment = flatten("pull_request_review_comment", fake.webhooks_sent[1][2])
    assert isinstance(flat_comment, ReviewCommentEvent) and flat_comment.body == "typo?"
    comment = fake.webhooks_sent[1][2]["comment"]
    assert (comment["path"], comment["line"], comment["side"], comment["pull_request_review_id"]) == (
        "src/app.py",
        10,
        "RIGHT",
        submitted["id"],
    )
    first = receiver.headers[0]
    assert first["User-Agent"] == "GitHub-Hookshot/fake" and first["X-GitHub-Event"] == "pull_request_review"
    assert first["Content-Type"] == "application/json"
    listed = await gh.getitem(f"{PULL}/comments")
    assert [c["diff_hunk"].splitlines()[-1] for c in listed] == ["+line ten", "+    return 1"]
    assert all("in_reply_to_id" not in c for c in listed)


@pytest.mark.slow
async def test_review_decision_and_dismissal(fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI) -> None:
    assert fake.review_decision(REPO, 1) is None
    blocking = await review(gh, "REQUEST_CHANGES", "Needs work")
    assert fake.review_decision(REPO, 1) == "CHANGES_REQUESTED"
    await review(gh, "COMMENT", "Just a note")
    assert fake.review_decision(REPO, 1) == "CHANGES_REQUESTED"  # COMMENTED changes nothing
    approval = await review(gh, "APPROVE", "")
    assert fake.review_decision(REPO, 1) == "APPROVED"
    await fake.submit_review(REPO, 1, by="bob", event="REQUEST_CHANGES", body="I object")
    assert fake.review_decision(REPO, 1) == "CHANGES_REQUESTED"  # any reviewer blocking blocks
    bob_review = fake.world.reviews[max(fake.world.reviews)]
    dismissed = await gh.put(
        f"{PULL}/reviews/{bob_review.id}/dismissals", data={"message": "outdated", "event": "DISMISS"}
    )
    assert dismissed["state"] == "DISMISSED"
    assert fake.review_decision(REPO, 1) == "APPROVED"
    await gh.put(f"{PULL}/reviews/{approval['id']}/dismissals", data={"message": "stale"})
    assert fake.review_decision(REPO, 1) is None  # dismissal clears
    assert blocking["id"] != approval["id"]
    comment_review = next(r for r in await gh.getitem(f"{PULL}/reviews") if r["state"] == "COMMENTED")
    with rejected():
        await gh.put(f"{PULL}/reviews/{comment_review['id']}/dismissals", data={"message": "no"})
    fake.set_dismissal_forbidden(REPO, True)
    again = await review(gh, "APPROVE", "")
    with pytest.raises(gidgethub.BadRequest) as caught:
        await gh.put(f"{PULL}/reviews/{again['id']}/dismissals", data={"message": "no"})
    assert caught.value.status_code == 403
    await fake.settle()
    dismissals = [
        p for e, _, p, _ in fake.webhooks_sent if e == "pull_request_review" and p["action"] == "dismissed"
    ]
    assert [p["review"]["state"] for p in dismissals] == ["dismissed", "dismissed"]
    assert all(p["sender"]["login"] == BOT for p in dismissals)


@pytest.mark.slow
async def test_reply_threads_and_graphql(
    fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI, receiver: Receiver
) -> None:
    await review(
        gh,
        "COMMENT",
        "",
        comments=[
            {"path": "src/app.py", "line": 10, "body": "first"},
            {"path": "src/new.py", "line": 1, "body": "second"},
        ],
    )
    root = (await gh.getitem(f"{PULL}/comments"))[0]
    human = await fake.reply(REPO, 1, root["id"], "I disagree", by="alice")
    reply = await gh.post(f"{PULL}/comments/{human['id']}/replies", data={"body": "Fair point"})
    assert reply["in_reply_to_id"] == root["id"] and human["in_reply_to_id"] == root["id"]

    variables = {"owner": "octo", "name": "repo", "number": 1}
    page1 = await graphql(gh, fake, THREADS_QUERY, **variables)
    threads = page1["repository"]["pullRequest"]["reviewThreads"]
    assert threads["pageInfo"]["hasNextPage"] is True
    (thread,) = threads["nodes"]
    assert thread["id"].startswith("PRRT_") and thread["path"] == "src/app.py" and thread["line"] == 10
    authors = [(c["author"]["__typename"], c["author"]["login"]) for c in thread["comments"]["nodes"]]
    assert authors == [("Bot", SLUG), ("User", "alice"), ("Bot", SLUG)]
    assert [c["databaseId"] for c in thread["comments"]["nodes"]] == [root["id"], human["id"], reply["id"]]
    page2 = await graphql(gh, fake, THREADS_QUERY, after=threads["pageInfo"]["endCursor"], **variables)
    second = page2["repository"]["pullRequest"]["reviewThreads"]
    assert second["pageInfo"]["hasNextPage"] is False and second["nodes"][0]["path"] == "src/new.py"

    resolved = await graphql(gh, fake, RESOLVE, id=thread["id"])
    assert resolved == {"resolveReviewThread": {"thread": {"id": thread["id"], "isResolved": True}}}
    with pytest.raises(gidgethub.GraphQLException) as caught:
        await graphql(gh, fake, RESOLVE, id="PRRT_does_not_exist")
    assert caught.value.response["errors"][0]["type"] == "NOT_FOUND"
    await fake.resolve_thread(thread["id"], by="alice", resolved=False)
    assert fake.threads(REPO, 1)[0]["is_resolved"] is False
    await fake.settle()
    thread_hooks = [(e, p) for e, _, p, _ in fake.webhooks_sent if e == "pull_request_review_thread"]
    assert [p["action"] for _, p in thread_hooks] == ["resolved", "unresolved"]
    assert sent_by_bot_or_decoy(flatten(*thread_hooks[0]).sender_login, IDENTITY)
    hooked = thread_hooks[0][1]["thread"]
    assert hooked["node_id"] == thread["id"]
    assert [c["id"] for c in hooked["comments"]] == [root["id"], human["id"], reply["id"]]
    human_hook = next(
        p
        for e, _, p, _ in fake.webhooks_sent
        if e == "pull_request_review_comment" and p["sender"]["login"] == "alice"
    )
    assert (
        sent_by_bot_or_decoy(flatten("pull_request_review_comment", human_hook).sender_login, IDENTITY)
        is False
    )
    mutations = [c for c in fake.writes() if c.path == "/graphql"]
    assert len(mutations) == 2 and all(c.graphql and "resolveReviewThread" in c.graphql for c in mutations)
    assert not any(
        c.path == "/graphql" and c.graphql and c.graphql.lstrip().startswith("query") for c in fake.writes()
    )


@pytest.mark.slow
async def test_graphql_blobs_aliases_and_errors(
    fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI, session: aiohttp.ClientSession
) -> None:
    head = fake.world.repo(REPO).branches["feat"]
    query = """
    query($owner: String!, $name: String!, $a: String!, $b: String!, $c: String!) {
      repository(owner: $owner, name: $name) {
        a: object(expression: $a) { __typename ... on Blob { text byteSize isBinary } }
        b: object(expression: $b) { ... on Blob { text isBinary } }
        c: object(expression: $c) { ... on Blob { text } }
      }
    }"""
    data = await graphql(
        gh,
        fake,
        query,
        owner="octo",
        name="repo",
        a=f"{head}:src/new.py",
        b="feat:logo.png",
        c=f"{head}:missing.py",
    )
    repo = data["repository"]
    assert repo["a"] == {
        "__typename": "Blob",
        "text": "def f():\n    return 1\n",
        "byteSize": 22,
        "isBinary": False,
    }
    assert repo["b"] == {"text": None, "isBinary": True}
    assert repo["c"] is None
    # a repository of another installation does not exist for this token
    with pytest.raises(gidgethub.GraphQLException) as caught:
        await graphql(
            gh,
            fake,
            'query($o: String!) { repository(owner: $o, name: "secret") { object(expression: "HEAD:a") {'
            " __typename } } }",
            o="other",
        )
    assert caught.value.response["errors"][0]["type"] == "NOT_FOUND"
    # a field GitHub has but the fake does not serve: answered as an error and recorded
    with pytest.raises(gidgethub.GraphQLException) as caught:
        await graphql(gh, fake, 'query { repository(owner: "octo", name: "repo") { stargazerCount } }')
    assert caught.value.response == {
        "errors": [
            {"message": "unsupported by the fake", "extensions": {"field": "Repository.stargazerCount"}}
        ]
    }
    assert fake.problems == [
        "POST /graphql: GraphQL field Repository.stargazerCount: unsupported by the fake"
    ]
    fake.problems.clear()


# ==================================================================================== validation
async def test_validator_rejects_bad_requests(fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI) -> None:
    bad_review = {"event": "COMMENT", "body": "x", "comments": [{"line": "ten"}]}
    assert validate_request("POST", f"{PULL}/reviews", bad_review) != []
    assert validate_request("POST", f"{PULL}/reviews", {"event": "SHIP_IT"}) != []
    with pytest.raises(gidgethub.BadRequest) as caught:
        await gh.post(f"{PULL}/reviews", data=bad_review)
    assert caught.value.status_code == 422
    assert any("body.comments[0]" in p for p in fake.problems)
    assert fake.world.reviews == {}
    fake.problems.clear()

    misspelled = RESOLVE.replace("isResolved", "isResolvd")
    assert any("isResolvd" in p for p in validate_graphql(misspelled, {"id": "PRRT_x"}))
    with pytest.raises(gidgethub.BadGraphQLRequest):
        await graphql(gh, fake, misspelled, id="PRRT_x")
    assert len(fake.problems) == 1 and "isResolvd" in fake.problems[0]
    fake.problems.clear()
    assert validate_request("GET", f"/repos/{REPO}/pulls/1?per_pag=3", None) != []
    assert validate_request("GET", f"/api/v3/repos/{REPO}/commits/feat/x/check-runs?per_page=100", None) == []
    assert validate_request("GET", f"/repos/{REPO}/pulls/one", None) != []


@pytest.mark.slow
def test_conformance_data_self_check() -> None:
    from tests.conformance import documented_examples, webhook_examples

    examples = webhook_examples()
    assert len(examples) >= 80
    assert [name for event, name, payload in examples if validate_webhook(event, payload, strict=True)] == []
    checked = list(documented_examples())
    assert len(checked) > 50
    assert validate_graphql("query { viewer { login } }") == []
    assert validate_graphql("query { viewer { logn } }") != []


# ============================================================================ people and comments
@pytest.mark.slow
async def test_requested_reviewers(
    fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI, receiver: Receiver
) -> None:
    status = await fake.request_review(REPO, 1, "bob", by="alice")
    assert status == 202
    assert [u["login"] for u in (await gh.getitem(f"{PULL}/requested_reviewers"))["users"]] == ["bob"]
    payload = receiver.deliveries[-1][2]
    flat = flatten("pull_request", payload)
    assert isinstance(flat, PullRequestEvent) and flat.requested_reviewer == "bob"
    assert not sent_by_bot_or_decoy(flat.sender_login, IDENTITY)
    await gh.post(f"{PULL}/requested_reviewers", data={"reviewers": ["carol"]})
    with rejected():
        await gh.post(f"{PULL}/requested_reviewers", data={"reviewers": ["alice"]})  # the author
    with rejected():
        await gh.post(f"{PULL}/requested_reviewers", data={"reviewers": [BOT]})  # an App cannot be requested
    await gh.delete(f"{PULL}/requested_reviewers", data={"reviewers": ["bob", "nobody-requested"]})
    await fake.settle()
    before = len(fake.webhooks_sent)
    await gh.delete(f"{PULL}/requested_reviewers", data={"reviewers": ["bob"]})  # no-op
    await fake.settle()
    assert len(fake.webhooks_sent) == before
    assert receiver.events() == [
        "pull_request.review_requested",
        "pull_request.review_requested",
        "pull_request.review_request_removed",
    ]
    removed = receiver.deliveries[-1][2]
    assert removed["requested_reviewer"]["login"] == "bob" and removed["sender"]["login"] == BOT
    assert [u["login"] for u in (await gh.getitem(PULL))["requested_reviewers"]] == ["carol"]
    await fake.submit_review(REPO, 1, by="carol", event="COMMENT", body="looked")
    assert (await gh.getitem(f"{PULL}/requested_reviewers"))["users"] == []  # reviewing clears the request


async def test_issue_comments_and_reactions(fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI) -> None:
    human = await fake.comment(REPO, 1, f"@{SLUG} review please", by="alice", author_association="OWNER")
    event, delivery, payload, status = fake.webhooks_sent[-1]
    flat = flatten(event, payload, delivery_id=delivery)
    assert isinstance(flat, IssueCommentEvent) and flat.is_pull_request and flat.pr_number == 1
    assert (
        flat.commenter_association == "OWNER"
        and not sent_by_bot_or_decoy(flat.sender_login, IDENTITY)
        and status == 202
    )
    assert payload == fake.issue_comment_payload(REPO, 1, human["id"], sender="alice") | {
        "installation": payload["installation"]
    }
    mine = await gh.post(f"/repos/{REPO}/issues/1/comments", data={"body": "On it <!-- revbot -->"})
    assert mine["performed_via_github_app"]["slug"] == SLUG
    assert [c["id"] for c in await gh.getitem(f"/repos/{REPO}/issues/1/comments")] == [
        human["id"],
        mine["id"],
    ]
    edited = await gh.patch(f"/repos/{REPO}/issues/comments/{mine['id']}", data={"body": "Done"})
    assert edited["body"] == "Done"
    url = f"/repos/{REPO}/issues/comments/{human['id']}/reactions"
    first = await gh.post(url, data={"content": "eyes"})
    again = await gh.post(url, data={"content": "eyes"})
    assert first["id"] == again["id"]
    assert [c.status for c in fake.calls if c.path == url] == [201, 200]
    assert (await gh.post(f"/repos/{REPO}/issues/1/reactions", data={"content": "rocket"}))[
        "content"
    ] == "rocket"
    await fake.settle()
    bot_hooks = [p for e, _, p, _ in fake.webhooks_sent if p["sender"]["login"] == BOT]
    assert [p["action"] for p in bot_hooks] == ["created", "edited"]
    assert all(sent_by_bot_or_decoy(flatten("issue_comment", p).sender_login, IDENTITY) for p in bot_hooks)


async def test_reaction_content_rules_without_validator(
    private_key: str, session: aiohttp.ClientSession
) -> None:
    hub = FakeGitHub(app_id=APP_ID, app_slug=SLUG, private_key_pem=private_key, webhook_secret=SECRET)
    build_world(hub)
    await hub.start()
    try:
        token = await mint(hub, session)
        gh = gidgethub.aiohttp.GitHubAPI(session, "t", oauth_token=token, base_url=hub.base_url)
        with rejected():
            await gh.post(f"/repos/{REPO}/issues/1/reactions", data={"content": "thumbsup"})
        response = hub.calls[-1].response
        assert validate_response("POST", f"/repos/{REPO}/issues/1/reactions", 422, response) == []
        big = {
            "name": "lint",
            "head_sha": hub.world.repo(REPO).branches["feat"],
            "output": {
                "title": "t",
                "summary": "s",
                "annotations": [
                    {
                        "path": "a",
                        "start_line": 1,
                        "end_line": 1,
                        "annotation_level": "notice",
                        "message": "m",
                    }
                ]
                * 51,
            },
        }
        with rejected():
            await gh.post(f"/repos/{REPO}/check-runs", data=big)
        assert hub.world.check_runs == {}
    finally:
        await hub.stop()


# ================================================================================== check runs
async def test_check_runs(fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI, receiver: Receiver) -> None:
    head = fake.world.repo(REPO).branches["feat"]
    note = {
        "path": "src/app.py",
        "start_line": 10,
        "end_line": 10,
        "annotation_level": "warning",
        "message": "hm",
    }
    run = await gh.post(
        f"/repos/{REPO}/check-runs",
        data={
            "name": SLUG,
            "head_sha": head,
            "status": "in_progress",
            "external_id": "job-1",
            "output": {"title": "Reviewing", "summary": "...", "annotations": [note]},
        },
    )
    assert run["app"]["slug"] == SLUG and run["pull_requests"][0]["number"] == 1
    done = await gh.patch(
        f"/repos/{REPO}/check-runs/{run['id']}",
        data={
            "conclusion": "neutral",
            "output": {"title": "Done", "summary": "2 notes", "annotations": [note]},
        },
    )
    assert done["status"] == "completed" and done["output"]["annotations_count"] == 2
    listed = await gh.getitem(f"/repos/{REPO}/commits/feat/check-runs")
    assert listed["total_count"] == 1 and listed["check_runs"][0]["id"] == run["id"]
    assert (await gh.getitem(f"/repos/{REPO}/commits/{head}/check-runs?check_name=other"))["total_count"] == 0
    too_many = {
        "name": "x",
        "head_sha": head,
        "output": {"title": "t", "summary": "s", "annotations": [note] * 51},
    }
    with rejected():
        await gh.post(f"/repos/{REPO}/check-runs", data=too_many)
    fake.problems.clear()  # the schema flags >50 annotations too (maxItems); that is the point here
    assert await fake.rerequest_check_run(REPO, run["id"], by="alice") == 202
    await fake.settle()
    assert receiver.events() == ["check_run.created", "check_run.completed", "check_run.rerequested"]
    flats = [flatten("check_run", p) for _, _, p in receiver.deliveries]
    assert all(isinstance(f, CheckRunEvent) and f.pr_numbers == (1,) and f.app_slug == SLUG for f in flats)
    assert [sent_by_bot_or_decoy(f.sender_login, IDENTITY) for f in flats] == [True, True, False]
    assert isinstance(flats[0], CheckRunEvent) and flats[0].external_id == "job-1"


# ====================================================================================== pushes
@pytest.mark.slow
async def test_push_synchronizes_and_outdates(
    fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI, receiver: Receiver
) -> None:
    await review(
        gh,
        "COMMENT",
        "",
        comments=[
            {"path": "src/app.py", "line": 10, "body": "on app"},
            {"path": "src/new.py", "line": 1, "body": "on new"},
        ],
    )
    await fake.settle()
    before = fake.world.repo(REPO).branches["feat"]
    after = fake.push(REPO, "feat", {"src/new.py": "def f():\n    return 2\n"})
    await fake.settle()
    event, _, payload = receiver.deliveries[-1]
    flat = flatten(event, payload)
    assert isinstance(flat, PullRequestEvent) and payload["action"] == "synchronize"
    assert (payload["before"], payload["after"]) == (before, after)
    assert payload["pull_request"]["head"]["sha"] == after
    assert flat.sender_login == "alice"
    assert (await gh.getitem(PULL))["head"]["sha"] == after
    by_path = {c["path"]: c for c in await gh.getitem(f"{PULL}/comments")}
    assert by_path["src/app.py"]["line"] == 10 and by_path["src/app.py"]["commit_id"] == after
    assert by_path["src/new.py"]["line"] is None and by_path["src/new.py"]["original_line"] == 1
    # GitHub answers ``line: null`` for outdated comments, which its REST description does not allow:
    # keep that answer out of the teardown's schema check.
    fake.calls.pop()
    data = await graphql(
        gh, fake, THREADS_QUERY.replace("first: 1", "first: 10"), owner="octo", name="repo", number=1
    )
    lines = [t["line"] for t in data["repository"]["pullRequest"]["reviewThreads"]["nodes"]]
    assert lines == [10, None]


@pytest.mark.slow
async def test_webhooks_are_ordered_and_follow_answers(
    fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI, receiver: Receiver
) -> None:
    seen_status: list[int] = []
    original = receiver.handle

    async def spy(request: web.Request) -> web.Response:
        seen_status.append(fake.calls[-1].status)
        return await original(request)

    receiver.handle = spy  # type: ignore[method-assign]
    for i in range(3):
        await gh.post(f"/repos/{REPO}/issues/1/comments", data={"body": f"note {i}"})
    await fake.settle()
    assert [p["comment"]["body"] for _, _, p in receiver.deliveries] == ["note 0", "note 1", "note 2"]
    assert all(status != 0 for status in seen_status)
    receiver.status = 500
    status = await fake.send_webhook(
        "pull_request",
        fake.pull_request_payload(REPO, 1, "opened", sender="alice"),
        delivery_id="fixed-id",
        sender="bob",
    )
    assert status == 500 and fake.webhooks_sent[-1][:2] == ("pull_request", "fixed-id")
    assert receiver.deliveries[-1][2]["sender"]["login"] == "bob"
    assert receiver.deliveries[-1][2]["installation"]["id"] == 7


@pytest.mark.slow
async def test_every_endpoint_answers_in_githubs_shape(
    fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI, session: aiohttp.ClientSession
) -> None:
    """Touch every REST endpoint the fake serves; the fixture's teardown validates each answer."""
    rv = await review(gh, "COMMENT", "x", comments=[{"path": "src/app.py", "line": 10, "body": "c"}])
    comment = (await gh.getitem(f"{PULL}/comments"))[0]
    issue_comment = await gh.post(f"/repos/{REPO}/issues/1/comments", data={"body": "hi"})
    run = await gh.post(
        f"/repos/{REPO}/check-runs", data={"name": "n", "head_sha": fake.world.repo(REPO).branches["feat"]}
    )
    paths = [
        f"/repos/{REPO}",
        f"/repos/{REPO}/pulls",
        PULL,
        f"{PULL}/files",
        f"{PULL}/reviews",
        f"{PULL}/reviews/{rv['id']}",
        f"{PULL}/reviews/{rv['id']}/comments",
        f"{PULL}/comments",
        f"{PULL}/requested_reviewers",
        f"/repos/{REPO}/pulls/comments/{comment['id']}",
        f"/repos/{REPO}/pulls/comments/{comment['id']}/reactions",
        f"/repos/{REPO}/issues/1/comments",
        f"/repos/{REPO}/issues/comments/{issue_comment['id']}",
        f"/repos/{REPO}/issues/comments/{issue_comment['id']}/reactions",
        f"/repos/{REPO}/issues/1/reactions",
        f"/repos/{REPO}/contents/src/app.py",
        f"/repos/{REPO}/contents/src",
        f"/repos/{REPO}/check-runs/{run['id']}",
        f"/repos/{REPO}/check-runs/{run['id']}/annotations",
        f"/repos/{REPO}/commits/feat/check-runs",
        f"/repos/{REPO}/collaborators/bob/permission",
        "/installation/repositories",
    ]
    for path in paths:
        await gh.getitem(path)
    await gh.post(f"/repos/{REPO}/pulls/comments/{comment['id']}/reactions", data={"content": "+1"})
    app_gh = gidgethub.aiohttp.GitHubAPI(session, "t", base_url=fake.base_url)
    for path in ("/app", "/app/installations", "/app/installations/7", f"/repos/{REPO}/installation"):
        await app_gh.getitem(path, jwt=app_jwt(fake.private_key_pem))
    served = {(c.method, c.path) for c in fake.calls if 200 <= c.status < 300}
    assert len(served) >= 30


async def test_git_tree_lists_a_commit_recursively_in_one_answer(
    fake: FakeGitHub, gh: gidgethub.aiohttp.GitHubAPI
) -> None:
    flat = await gh.getitem(f"/repos/{REPO}/git/trees/feat")
    assert [(e["path"], e["type"]) for e in flat["tree"]] == [
        ("docs", "tree"),
        ("logo.png", "blob"),
        ("src", "tree"),
    ]
    deep = await gh.getitem(f"/repos/{REPO}/git/trees/feat?recursive=1")
    assert [(e["path"], e["mode"]) for e in deep["tree"]] == [
        ("docs", "040000"),
        ("docs/README.md", "100644"),
        ("logo.png", "100644"),
        ("src", "040000"),
        ("src/app.py", "100644"),
        ("src/new.py", "100644"),
    ]
    assert deep["truncated"] is False
    head = fake.world.repo(REPO).branches["feat"]
    assert (await gh.getitem(f"/repos/{REPO}/git/trees/{head}?recursive=1"))["tree"] == deep["tree"]
    with pytest.raises(gidgethub.BadRequest) as caught:
        await gh.getitem(f"/repos/{REPO}/git/trees/nowhere?recursive=1")
    assert caught.value.status_code == 404
    assert fake.problems == []
    for call in fake.calls:
        if "/git/trees/" in call.path and call.status == 200:
            assert validate_response(call.method, call.path, call.status, call.response) == []


# ----------------------------------------------------------------------------------- rate limits
@pytest.mark.parametrize(
    ("method", "path", "mutation", "expected"),
    [
        ("GET", "/repos/o/r/pulls/1", False, Cost(Resource.CORE, 1, False)),
        ("HEAD", "/repos/o/r", False, Cost(Resource.CORE, 1, False)),
        ("POST", "/repos/o/r/issues/1/comments", False, Cost(Resource.CORE, 5, True)),
        ("PATCH", "/repos/o/r/check-runs/5", False, Cost(Resource.CORE, 5, False)),
        ("DELETE", "/repos/o/r/pulls/1/requested_reviewers", False, Cost(Resource.CORE, 5, False)),
        ("POST", "/app/installations/7/access_tokens", False, Cost(Resource.CORE, 5, False)),
        ("POST", "/graphql", False, Cost(Resource.GRAPHQL, 1, False)),
        ("POST", "/graphql", True, Cost(Resource.GRAPHQL, 5, True)),
    ],
)
def test_what_a_request_costs_against_githubs_secondary_limits(
    method: str, path: str, mutation: bool, expected: Cost
) -> None:
    assert cost_of(method, path, mutation=mutation) == expected


def test_the_fakes_limits_are_githubs_documented_ones_by_default() -> None:
    assert RateLimits() == RateLimits(
        concurrent=100,
        rest_points_per_minute=900,
        graphql_points_per_minute=2000,
        content_per_minute=80,
        content_per_hour=500,
        primary_per_hour=5000,
    )


class RateClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _comment(fake: FakeGitHub, token: str, n: int) -> tuple[int, dict[str, str], dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{fake.api_url}/repos/{REPO}/issues/1/comments",
            json={"body": f"comment {n}"},
            headers={"Authorization": f"token {token}", "Accept": "application/vnd.github+json"},
        ) as response,
    ):
        return response.status, dict(response.headers), await response.json()


async def test_content_creation_over_the_limit_is_refused_with_retry_after(fake: FakeGitHub) -> None:
    clock = RateClock()
    fake.limiter.clock = clock
    fake.limiter.limits = RateLimits(content_per_minute=2, content_per_hour=3)
    token = fake.tokens.issue(7).token.token
    assert (await _comment(fake, token, 1))[0] == 201
    clock.now += 20
    assert (await _comment(fake, token, 2))[0] == 201
    status, headers, body = await _comment(fake, token, 3)
    assert (status, headers["Retry-After"]) == (403, "40")  # the first leaves the minute at 60 s
    assert body["message"].startswith("You have exceeded a secondary rate limit")
    assert body["documentation_url"].endswith("#about-secondary-rate-limits")
    clock.now += 40
    assert (await _comment(fake, token, 3))[0] == 201  # the refused one was not counted
    clock.now += 60
    status, headers, _ = await _comment(fake, token, 4)  # the hour's three are spent
    assert (status, headers["Retry-After"]) == (403, str(3600 - 60 - 60))
    assert [c.status for c in fake.calls if c.path.endswith("/issues/1/comments")] == [
        201,
        201,
        403,
        201,
        403,
    ]
    assert [path for _, _, path in fake.limiter.refused] == [f"/repos/{REPO}/issues/1/comments"] * 2
    # Another installation has limits of its own.
    assert fake.limiter.headers("installation ID 8", Resource.CORE)["X-RateLimit-Used"] == "0"


def test_at_most_the_concurrent_limit_of_requests_are_in_flight() -> None:
    limiter = Limiter(RateLimits(concurrent=2), clock=lambda: 0.0, wall=lambda: 0.0)
    assert limiter.begin("a", "GET", "/x", mutation=False) is None
    assert limiter.begin("a", "GET", "/x", mutation=False) is None
    refusal = limiter.begin("a", "GET", "/x", mutation=False)
    assert refusal is not None and refusal.status == 403 and "Retry-After" in refusal.headers
    assert limiter.begin("b", "GET", "/x", mutation=False) is None  # per identity
    limiter.end("a")
    assert limiter.begin("a", "GET", "/x", mutation=False) is None


async def test_points_and_the_primary_limit_are_counted_and_reported(fake: FakeGitHub) -> None:
    clock = RateClock()
    fake.limiter.clock = clock
    fake.limiter.limits = RateLimits(rest_points_per_minute=7, primary_per_hour=4, refusal_status=429)
    token = fake.tokens.issue(7).token.token
    headers = {"Authorization": f"token {token}"}
    async with aiohttp.ClientSession() as session:

        async def get() -> aiohttp.ClientResponse:
            async with session.get(f"{fake.api_url}/repos/{REPO}/pulls/1", headers=headers) as response:
                await response.read()
                return response

        first = await get()
        assert first.status == 200
        assert {
            k: first.headers[k] for k in ("X-RateLimit-Limit", "X-RateLimit-Used", "X-RateLimit-Remaining")
        } == {
            "X-RateLimit-Limit": "4",
            "X-RateLimit-Used": "1",
            "X-RateLimit-Remaining": "3",
        }
        assert first.headers["X-RateLimit-Resource"] == "core"
        reset = int(first.headers["X-RateLimit-Reset"])
        assert abs(reset - (time.time() + 3600)) < 5
        assert (await _comment(fake, token, 1))[0] == 201  # 1 + 5 points
        assert (await get()).status == 200  # 7 points: fits the minute; a comment more would not
        status, answer_headers, _ = await _comment(fake, token, 2)
        assert (status, answer_headers["Retry-After"]) == (429, "60")
        clock.now += 61
        assert (await get()).status == 200  # the fourth request of the hour
        over = await get()
        assert over.status == 429
        assert over.headers["X-RateLimit-Remaining"] == "0"
        assert int(over.headers["X-RateLimit-Reset"]) >= reset - 61
