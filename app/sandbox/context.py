"""Request context and replies shared by the REST and GraphQL handlers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from yarl import URL

from .actions import Emit
from .errors import ApiError, not_found
from .host import Host
from .state import NotFound, Pull, Repo

DEFAULT_PER_PAGE = 30
MAX_PER_PAGE = 100


@dataclass
class Reply:
    status: int
    body: Any = None  # JSON value; None means no body
    headers: dict[str, str] = field(default_factory=dict)
    text: str | None = None  # a non-JSON body (raw file contents)
    content_type: str | None = None


@dataclass
class Ctx:
    fake: Host
    method: str
    path: str
    url: URL  # the URL as the client sent it (keeps a GHES prefix), for Link headers
    params: dict[str, str]
    query: dict[str, str]
    body: Any
    headers: dict[str, str]
    installation_id: int | None
    actor: str  # login of whoever is acting (the bot for installation tokens)
    emit: Emit

    def repo(self) -> Repo:
        """The repository named in the path, if this installation can see it (else 404, like GitHub)."""
        try:
            repo = self.fake.world.repo(f"{self.params['owner']}/{self.params['repo']}")
        except NotFound:
            raise not_found() from None
        if self.installation_id is not None and repo.installation_id != self.installation_id:
            raise not_found()
        return repo

    def pull(self, repo: Repo | None = None) -> Pull:
        try:
            return self.fake.world.pull(repo or self.repo(), int(self.params["number"]))
        except NotFound:
            raise not_found() from None

    def int_param(self, name: str) -> int:
        return int(self.params[name])

    def json_object(self) -> dict[str, Any]:
        if self.body is None:
            return {}
        if not isinstance(self.body, dict):
            raise ApiError(400, "Problems parsing JSON")
        return self.body

    def page(self, items: list[Any], *, max_per_page: int = MAX_PER_PAGE, wrap: str | None = None) -> Reply:
        """One page of ``items`` honouring ``per_page``/``page``, with GitHub's ``Link`` header.

        ``wrap`` names the key for endpoints that answer ``{"total_count": N, key: [...]}``.
        """
        try:
            per_page = int(self.query.get("per_page", DEFAULT_PER_PAGE))
        except ValueError:
            per_page = DEFAULT_PER_PAGE
        per_page = max(1, min(per_page, max_per_page))
        try:
            page = max(1, int(self.query.get("page", 1)))
        except ValueError:
            page = 1
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []

        def link(number: int, rel: str) -> str:
            return f'<{self.url.update_query(page=str(number))}>; rel="{rel}"'

        if page > 1:
            links.append(link(min(page - 1, last), "prev"))
        if page < last:
            links.append(link(page + 1, "next"))
            links.append(link(last, "last"))
        if page > 1:
            links.append(link(1, "first"))
        headers = {"Link": ", ".join(links)} if links else {}
        body: Any = {"total_count": len(items), wrap: chunk} if wrap else chunk
        return Reply(200, body, headers)
