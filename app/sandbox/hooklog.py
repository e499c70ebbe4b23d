"""The App's webhook: its configuration and its delivery log, as GitHub keeps them.

Every attempt to deliver a webhook is one entry (a redelivery of the same ``guid`` is another),
with what was sent and what came back; GitHub keeps them for 3 days and lists them newest first,
paginated by an opaque cursor. ``GET /app/hook/deliveries`` and ``GET /app/hook/deliveries/{id}``
answer from here, and a failed attempt stays failed: GitHub never retries by itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .state import iso

RETENTION_SECONDS = 3 * 24 * 3600


def status_text(status_code: int, error: str | None) -> str:
    """GitHub's words for an attempt's outcome."""
    if error is not None:
        return error
    return "OK" if 200 <= status_code < 300 else f"Invalid HTTP Response: {status_code}"


@dataclass
class HookDelivery:
    id: int
    guid: str
    event: str
    action: str | None
    installation_id: int | None
    repository_id: int | None
    delivered_at: float
    duration: float
    status_code: int
    status: str
    redelivery: bool
    url: str
    request_headers: dict[str, str]
    payload: dict[str, Any]
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: str | None = None

    def item(self) -> dict[str, Any]:
        """The list entry (``hook-delivery-item``)."""
        return {
            "id": self.id,
            "guid": self.guid,
            "delivered_at": iso(self.delivered_at),
            "redelivery": self.redelivery,
            "duration": round(self.duration, 3),
            "status": self.status,
            "status_code": self.status_code,
            "event": self.event,
            "action": self.action,
            "installation_id": self.installation_id,
            "repository_id": self.repository_id,
            "throttled_at": None,
        }

    def full(self) -> dict[str, Any]:
        """One delivery with its request and response (``hook-delivery``)."""
        return {
            **self.item(),
            "url": self.url,
            "request": {"headers": dict(self.request_headers), "payload": self.payload},
            "response": {"headers": dict(self.response_headers), "payload": self.response_body},
        }


@dataclass
class HookLog:
    """The delivery log and the webhook configuration of the App."""

    deliveries: list[HookDelivery] = field(default_factory=list)
    content_type: str = "json"
    insecure_ssl: str = "0"
    _next_id: int = 1

    def add(
        self,
        *,
        guid: str,
        event: str,
        payload: dict[str, Any],
        url: str,
        request_headers: dict[str, str],
        status_code: int,
        error: str | None,
        duration: float,
        response_headers: dict[str, str] | None = None,
        response_body: str | None = None,
        at: float | None = None,
    ) -> HookDelivery:
        installation = payload.get("installation")
        repository = payload.get("repository")
        action = payload.get("action")
        entry = HookDelivery(
            id=self._next_id,
            guid=guid,
            event=event,
            action=action if isinstance(action, str) else None,
            installation_id=installation.get("id") if isinstance(installation, dict) else None,
            repository_id=repository.get("id") if isinstance(repository, dict) else None,
            delivered_at=time.time() if at is None else at,
            duration=duration,
            status_code=status_code,
            status=status_text(status_code, error),
            redelivery=any(d.guid == guid for d in self.deliveries),
            url=url,
            request_headers=request_headers,
            payload=payload,
            response_headers=dict(response_headers or {}),
            response_body=response_body,
        )
        self._next_id += 1
        self.deliveries.append(entry)
        return entry

    def find(self, delivery_id: int) -> HookDelivery | None:
        return next((d for d in self.deliveries if d.id == delivery_id), None)

    def page(
        self, *, cursor: str | None, per_page: int, outcome: str | None, now: float
    ) -> tuple[list[HookDelivery], str | None]:
        """Newest first, starting at ``cursor``; the cursor of the next page (None at the end)."""
        kept = [d for d in reversed(self.deliveries) if now - d.delivered_at <= RETENTION_SECONDS]
        if outcome == "success":
            kept = [d for d in kept if 200 <= d.status_code < 400]
        elif outcome == "failure":
            kept = [d for d in kept if 400 <= d.status_code < 600]
        start = 0
        if cursor:
            if not cursor.startswith("v1_") or not cursor[3:].isdigit():
                raise ValueError(cursor)
            start_id = int(cursor[3:])
            start = next((i for i, d in enumerate(kept) if d.id <= start_id), len(kept))
        chunk = kept[start : start + per_page]
        following = kept[start + per_page : start + per_page + 1]
        return chunk, (f"v1_{following[0].id}" if following else None)
