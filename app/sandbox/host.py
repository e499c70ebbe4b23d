"""What the request handlers (``server``, ``rest``, ``context``) use of the fake GitHub that
serves them: its state and actions, its App's identity, its logs. ``fake.FakeGitHub`` is the one
host; naming it here as a protocol keeps the modules it builds from importing it back.
"""

from __future__ import annotations

from typing import Any, Protocol

from .actions import Actions
from .auth import TokenStore
from .ci import CiActions
from .hooklog import HookLog
from .payloads import Shapes
from .recording import Call, Validator
from .state import Repo, World
from .webhooks import Dispatcher, Outgoing


class Host(Protocol):
    world: World
    actions: Actions
    ci: CiActions
    shapes: Shapes
    tokens: TokenStore
    tokens_issued: list[tuple[int, str, str]]
    hooks: HookLog
    dispatcher: Dispatcher
    validator: Validator | None
    calls: list[Call]
    problems: list[str]
    webhook_url: str | None
    webhook_secret: str
    enterprise: bool
    app_id: int
    public_key_pem: str

    @property
    def bot_login(self) -> str: ...

    def set_webhook_secret(self, secret: str) -> None: ...

    def register_manifest(self, manifest: Any) -> str: ...

    def convert_manifest(self, code: str) -> dict[str, Any]: ...

    def permission_of(self, repo: Repo, login: str) -> str: ...

    def prepare_webhook(
        self, event: str, payload: dict[str, Any], delivery_id: str | None = None
    ) -> Outgoing: ...
