"""GitHub-shaped error answers."""

from __future__ import annotations

from typing import Any

DOCS = "https://docs.github.com/rest"


class ApiError(Exception):
    """Answer the current request with ``status`` and GitHub's error body."""

    def __init__(
        self,
        status: int,
        message: str,
        errors: list[Any] | None = None,
        *,
        headers: dict[str, str] | None = None,
        documentation_url: str = DOCS,
    ) -> None:
        super().__init__(f"{status} {message}")
        self.status = status
        self.message = message
        self.errors = errors
        self.headers = headers or {}
        self.documentation_url = documentation_url

    def body(self) -> dict[str, Any]:
        data: dict[str, Any] = {"message": self.message, "documentation_url": self.documentation_url}
        if self.errors is not None:
            data["errors"] = self.errors
        data["status"] = str(self.status)
        return data


def not_found() -> ApiError:
    return ApiError(404, "Not Found", documentation_url=DOCS)


def unprocessable(*errors: str) -> ApiError:
    """422 in the ``validation-error-simple`` shape GitHub uses for pull-request reviews."""
    return ApiError(422, "Unprocessable Entity", list(errors))


def validation_failed(
    resource: str, field: str, code: str = "invalid", message: str | None = None
) -> ApiError:
    """422 in the ``validation-error`` shape (``errors`` are objects)."""
    error: dict[str, Any] = {"resource": resource, "field": field, "code": code}
    if message is not None:
        error["message"] = message
    return ApiError(422, "Validation Failed", [error])
