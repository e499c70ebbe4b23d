"""What the echo webhooks did, measured: the fake's records joined with the bot's ledger.

An echo is a webhook GitHub sends because of the bot's own write (its sender is the bot). For
each echo delivery, the ledger row says how its job ended and which handlers ran (a handler that
did not run cannot have called GitHub). The API calls the job made are counted from the fake's
timestamped records: jobs of one pull request run one at a time, so a call made between the end
of the previous job of that subject and the end of this job is this job's.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..sandbox import Call
from .runner import StampedList
from .timeline import is_write

FINISHED = ("done", "failed", "skipped")


@dataclass
class EchoOutcome:
    name: str  # event.action
    delivery_id: str
    answer: int  # the bot's HTTP status for the delivery
    status: str | None  # the job's final status (None: no ledger row)
    handlers: tuple[str, ...]
    writes: tuple[str, ...]  # "METHOD path" of the writes the job made


@dataclass
class EchoReport:
    outcomes: list[EchoOutcome] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.outcomes)

    @property
    def silent(self) -> list[EchoOutcome]:
        return [o for o in self.outcomes if not o.handlers and not o.writes and o.status == "done"]

    @property
    def acting(self) -> list[EchoOutcome]:
        return [o for o in self.outcomes if o.handlers or o.writes or o.status != "done"]

    @property
    def writes(self) -> int:
        return sum(len(o.writes) for o in self.outcomes)

    def by_name(self, outcomes: Sequence[EchoOutcome]) -> str:
        counts = Counter(o.name for o in outcomes)
        return ", ".join(f"{n}x {name}" if n > 1 else name for name, n in sorted(counts.items()))

    def lines(self, bot_login: str) -> list[str]:
        """The closing summary: the first line headlines, the others detail."""
        if not self.outcomes:
            return [f"echo: GitHub sent no webhook with {bot_login} as sender"]
        answers = Counter(o.answer for o in self.outcomes)
        answered = ", ".join(f"{n}x {status}" for status, n in sorted(answers.items()))
        out = [
            f"echo: {self.total} webhook(s) had {bot_login} as sender (the bot answered {answered}); "
            f"{len(self.silent)} woke nothing, {len(self.acting)} ran a handler"
        ]
        if self.silent:
            out.append(f"woke nothing (job done, no handler ran, 0 API calls): {self.by_name(self.silent)}")
        for o in self.acting:
            handlers = ", ".join(h.rsplit(".", 1)[-1] for h in o.handlers)
            ran = f"ran {handlers} (a handler that opts in to own events)" if handlers else "ran no handler"
            writes = ", ".join(o.writes) or "no write"
            out.append(f"{o.name} {o.delivery_id[:8]}: job {o.status}; {ran} -> {writes}")
        opted_in = sum(len(o.writes) for o in self.outcomes if o.handlers)
        out.append(
            f"writes made in answer to echoes: {self.writes} (by handlers that opt in to own events: "
            f"{opted_in}; by any other echo: {self.writes - opted_in})"
        )
        return out


def _window_writes(rows: list[dict[str, Any]], calls: StampedList[Call]) -> dict[str, tuple[str, ...]]:
    """Per delivery id, the writes made while its job ran (see the module docstring)."""
    writes = [(calls.time_of(i), c) for i, c in enumerate(calls) if c.auth is not None and is_write(c)]
    previous_end: dict[str, float] = {}
    out: dict[str, tuple[str, ...]] = {}
    for row in sorted(rows, key=lambda r: r["id"]):
        if row["status"] not in FINISHED:
            continue
        start = max(float(row["received_at"]), previous_end.get(row["subject"], 0.0))
        end = float(row["updated_at"])
        previous_end[row["subject"]] = end
        out[row["delivery_id"]] = tuple(f"{c.method} {c.path}" for t, c in writes if start < t <= end)
    return out


async def echo_report(
    store: Any,
    hooks: StampedList[tuple[str, str, dict[str, Any], int]],
    calls: StampedList[Call],
    bot_login: str,
) -> EchoReport:
    rows: list[dict[str, Any]] = await store.all_jobs()
    by_id = {row["delivery_id"]: row for row in rows}
    windows = _window_writes(rows, calls)
    report = EchoReport()
    for event, delivery_id, payload, status in hooks:
        if (payload.get("sender") or {}).get("login") != bot_login:
            continue
        action = payload.get("action")
        row = by_id.get(delivery_id)
        handlers = tuple(json.loads(row["done_handlers"])) if row else ()
        report.outcomes.append(
            EchoOutcome(
                name=f"{event}.{action}" if action else event,
                delivery_id=delivery_id,
                answer=status,
                status=row["status"] if row else None,
                handlers=handlers,
                writes=windows.get(delivery_id, ()),
            )
        )
    return report
