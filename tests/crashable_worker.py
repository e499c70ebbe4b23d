"""A worker process for the crash-recovery tests: the real ``Runtime`` and ``work()`` loop, with
a test concern that reads the PR and posts one comment per PR comment (or, with
``CRASHABLE_WORKER_HANDLERS=app``, the bot's own handlers), and a short lease so that a killed
process's claim expires quickly. Settings come from the environment, as for
``python -m app worker``."""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import replace

from app.demo.harness import FAST_WORKER
from app.events import IssueCommentEvent
from app.handlers.concern import OrderedRouter
from app.handlers.context import Context
from app.runtime import Runtime, work
from app.settings.config import load_settings
from app.settings.logs import setup_logging

router = OrderedRouter()


@router.register("issue_comment", action="created")
async def answer(event: IssueCommentEvent, ctx: Context) -> None:
    await ctx.gh.getitem(f"/repos/{event.repo}/pulls/{event.issue_number}")
    await ctx.gh.post(f"/repos/{event.repo}/issues/{event.issue_number}/comments", data={"body": "answer"})


if __name__ == "__main__":
    settings, pem = load_settings()
    setup_logging(logging.INFO)
    options = replace(FAST_WORKER, lease_seconds=1.5)
    chosen = None if os.environ.get("CRASHABLE_WORKER_HANDLERS") == "app" else router
    asyncio.run(work(Runtime(settings, pem, router=chosen, worker_options=options)))
