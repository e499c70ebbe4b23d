"""The router a concern registers its handlers on, and the one the concerns are composed into.

gidgethub's ``Router.fetch`` answers a set; the order handlers of one event run in (which the
retried job's ``done_handlers`` record follows) is declared here instead: the order handlers are
registered in within a concern's module, and, once composed, the order the concerns are listed in
(``app/handlers/__init__.py``'s ``CONCERNS``). A module's name or path plays no part in it.
"""

from __future__ import annotations

from typing import Any

from gidgethub import routing, sansio

from .context import Handler


class OrderedRouter(routing.Router):
    """A gidgethub ``Router`` that remembers the order its handlers were added in."""

    def __init__(self, *concerns: OrderedRouter) -> None:
        self.order: list[Handler] = []
        super().__init__(*concerns)  # adds the concerns' routes, in gidgethub's own order
        self.order = list(dict.fromkeys(h for concern in concerns for h in concern.order))

    def add(self, func: Handler, event_type: str, **data_detail: Any) -> None:
        super().add(func, event_type, **data_detail)
        if func not in self.order:
            self.order.append(func)

    def fetch_in_order(self, event: sansio.Event) -> list[Handler]:
        """The handlers ``event`` would be given to, in the declared order."""
        found = self.fetch(event)
        return [h for h in self.order if h in found]
