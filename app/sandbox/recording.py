"""What the fake records about the traffic it sees, and the hook tests use to check it.

The sandbox carries no GitHub descriptions of its own: a test installs a ``Validator`` (for
example ``tests/conformance.py``'s checker built on GitHub's OpenAPI description, GraphQL schema
and octokit's webhook schemas) and the fake runs every request and every webhook through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from .gql import operation_type


@dataclass
class Call:
    """One HTTP request the fake received, as it understood and answered it."""

    method: str
    path: str  # without the query and without a GHES "/api/v3" prefix
    query: dict[str, str]
    body: Any  # parsed JSON body, or None
    status: int  # what the fake answered (0 while the request is still being handled)
    auth: str | None  # "jwt" | "token" | None
    installation_id: int | None  # for token-authenticated calls
    graphql: str | None = None  # POST /graphql: the query document
    variables: dict[str, Any] | None = None
    # The JSON the fake answered with, so tests can check the fake's own answers against GitHub's
    # schemas. Left out of repr/eq to keep those readable.
    response: Any = field(default=None, repr=False, compare=False)
    # The path exactly as requested (with a GHES "/api/v3" or "/api/graphql" form), so tests can
    # tell which base URL the bot used.
    raw_path: str = field(default="", repr=False, compare=False)
    delayed: float = field(default=0.0, repr=False, compare=False)  # seconds a ``delay`` held it
    # Whether it counted against the caller's primary rate limit: admitted, and not a 304.
    counted: bool = field(default=False, repr=False, compare=False)

    @property
    def is_graphql_mutation(self) -> bool:
        if self.graphql is None:
            return False
        return operation_type(self.graphql, self.body) == "mutation"


class Validator(Protocol):
    """Checks traffic against GitHub's own descriptions; each method returns problems ([] = fine)."""

    def request(self, method: str, path_with_query: str, body: Any) -> list[str]: ...

    def graphql(self, query: str, variables: dict[str, Any] | None) -> list[str]: ...

    def webhook(self, event: str, payload: dict[str, Any]) -> list[str]: ...
