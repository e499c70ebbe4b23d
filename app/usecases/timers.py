"""The one seam through which a use case asks to be run again later: durable timers.

A timer is a job in the durable queue (``Store.schedule``), never a sleeping task or a poller:
a restart or a crash does not lose it. ``app.jobs.timers.StoreTimers`` is the implementation the
runtime builds; tests of use cases record what was asked.
"""

from __future__ import annotations

from typing import Protocol


class Timers(Protocol):
    def now(self) -> float:
        """Epoch seconds on the queue's clock (what due times are compared with)."""
        ...

    async def look_again(
        self, *, repo: str, pr_number: int, installation_id: int, at: float, since: float
    ) -> None:
        """Have the pull request's readiness evaluated at ``at`` or a little later (asking
        again for about the same moment records nothing new). ``since``: when its cause
        arrived."""
        ...

    async def look_now(
        self, *, timer_id: str, repo: str, pr_number: int, installation_id: int, since: float
    ) -> None:
        """A due timer hands its evaluation to the pull request's own queue (one job at a time
        per pull request), once per timer however often the timer's job runs."""
        ...
