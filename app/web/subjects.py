"""The queue key of a delivery: which pull request (or issue, or repository) its job is about.

The webhook receiver computes it from the raw payload when it records a delivery, before any
validation (``events.flatten`` runs later, in the worker), so it only peeks at a few keys.
Jobs with the same key run one at a time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..events import NUMBER_AT


def _get(obj: Any, *path: str) -> Any:
    """Walk nested mappings; None as soon as a step is missing or not a mapping."""
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _int(value: Any) -> int | None:
    """An int that really is one (``True`` is an int to Python, not a PR number)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _subject_number(event_name: str, payload: Mapping[str, Any]) -> int | None:
    """The PR/issue number a delivery is about, when it is about exactly one."""
    at = NUMBER_AT.get(event_name)
    if at is None:
        return None
    if at.listed:
        prs = _get(payload, at.key, "pull_requests")
        return _int(_get(prs[0], "number")) if isinstance(prs, list) and len(prs) == 1 else None
    number = _int(_get(payload, at.key, "number"))
    return number or _int(payload.get("number")) if at.top_level else number


def subject_of(event_name: str, payload: Mapping[str, Any]) -> str:
    """The queue key for the job this delivery becomes; never raises.

    Deliveries about the same PR (or issue) serialise on ``owner/repo#N`` so the bot never works
    on one PR twice at once; everything else about a repo shares the repo key. This runs on the
    webhook's hot path before any validation, so it only peeks at a few keys and falls back to
    ``"global"`` for anything it does not understand.
    """
    if not isinstance(payload, Mapping):
        return "global"
    full_name = _get(payload, "repository", "full_name")
    if isinstance(full_name, str) and full_name:
        repo = full_name.lower()
        number = _subject_number(event_name, payload)
        return f"{repo}#{number}" if number is not None else repo
    installation_id = _int(_get(payload, "installation", "id"))
    return f"installation:{installation_id}" if installation_id is not None else "global"
