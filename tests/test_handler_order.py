"""The order the handlers of one event run in is declared (``CONCERNS`` as listed, then each
concern's registration order), never derived from module or function names; and the bot's
handlers with their recorded names (what a retried job's ``done_handlers`` holds) are listed here,
so that renaming one is a visible change."""

from __future__ import annotations

from typing import Any

from app.events import Event
from app.handlers import CONCERNS, router
from app.handlers.concern import OrderedRouter
from app.handlers.context import Context
from app.jobs.routing import handler_name, select_handlers
from tests.recording_github import IDENTITY, REPO


async def zz_registered_first(event: Any, ctx: Context) -> None: ...


async def aa_registered_second(event: Any, ctx: Context) -> None: ...


async def mm_in_the_second_concern(event: Any, ctx: Context) -> None: ...


async def bb_for_another_action(event: Any, ctx: Context) -> None: ...


def test_handlers_run_in_the_declared_order_whatever_their_names() -> None:
    first, second = OrderedRouter(), OrderedRouter()
    # Registered the other way round from how their names sort, as the concerns are listed.
    second.register("pull_request", action="synchronize")(mm_in_the_second_concern)
    first.register("pull_request", action="synchronize")(zz_registered_first)
    first.register("pull_request", action="opened")(bb_for_another_action)
    first.register("pull_request")(aa_registered_second)  # every action: gidgethub's other table
    composed = OrderedRouter(first, second)
    flat = Event(delivery_id="d", event="pull_request", installation_id=1, repo=REPO, sender_login="alice")

    chosen = select_handlers(composed, flat, {"action": "synchronize"}, IDENTITY)

    assert chosen == [zz_registered_first, aa_registered_second, mm_in_the_second_concern]
    assert select_handlers(OrderedRouter(second, first), flat, {"action": "synchronize"}, IDENTITY) == [
        mm_in_the_second_concern,
        zz_registered_first,
        aa_registered_second,
    ]


def test_the_bots_handlers_their_order_and_recorded_names() -> None:
    assert [handler_name(h) for h in router.order] == [
        "app.handlers.mentions.on_conversation_comment",
        "app.handlers.mentions.on_inline_comment",
        "app.handlers.review.on_review_requested",
        "app.handlers.review.on_opened",
        "app.handlers.review.on_push",
        "app.handlers.review.on_rerun",
        "app.handlers.decoy.on_own_review_submitted",
        "app.handlers.threads.on_thread_reply",
        "app.handlers.threads.on_new_commits",
        "app.handlers.readiness.on_pull_request",
        "app.handlers.readiness.on_review",
        "app.handlers.readiness.on_thread",
        "app.handlers.readiness.on_inline_comment",
        "app.handlers.readiness.on_comment",
        "app.handlers.readiness.on_check_run",
        "app.handlers.readiness.on_check_suite",
        "app.handlers.readiness.on_status",
        "app.handlers.readiness.on_timer",
        "app.handlers.readiness.on_look",
    ]
    assert router.order == [h for concern in CONCERNS for h in concern.order]
