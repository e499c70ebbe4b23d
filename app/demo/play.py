"""The driver of ``python -m app demo``: one scenario on a fresh stage, its timeline printed, its
logs, database and HTML page kept."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from ..settings.logs import setup_logging
from . import html
from .measure import echo_report
from .runner import BOT, READINESS_OFF_STAGE, REPO, Stage
from .show import DemoOptions, Show
from .stories import SCENARIOS, STORIES
from .timeline import Narrator, Timeline

READY_SETTLE = 0.3  # seconds: a burst of events is looked at together, this long after the first


async def _play(options: DemoOptions, stage: Stage, timeline: Timeline) -> str | None:
    """Play the scenario; the HTML page, when asked for."""
    narrator = Narrator(timeline, stage.fake, bot_login=BOT)
    show = Show(stage, timeline, narrator, options)
    page = None
    await stage.start()
    try:
        mode = "approval on" if options.approve else "REVIEW_APPROVE=false"
        timeline.say("demo", f"fake GitHub at {stage.fake.base_url} ({REPO}, App {BOT})", kind="demo")
        worker = "in-process worker" if stage.run_worker else "no worker (separate worker processes)"
        timeline.say("demo", f"bot (Runtime, {worker}, {mode}) listening at {stage.webhook_url}", kind="demo")
        narrator.start()
        await STORIES[options.scenario](show)
        await stage.drain()
        await narrator.stop()
        report = await echo_report(stage.store, stage.webhooks, stage.calls, BOT)
        timeline.heading("Echoes")
        for index, line in enumerate(report.lines(BOT)):
            if index == 0:
                timeline.say("demo", line, kind="demo")
            else:
                timeline.more(line.strip(), indent=2)
        if options.html is not None and show.number:
            page = html.render_pull(stage.fake, REPO, show.number, bot_login=BOT, pushes=show.pushes)
    finally:
        await narrator.stop()
        await stage.stop()
    return page


def run_demo(options: DemoOptions, out: TextIO | None = None) -> int:
    """Play ``options.scenario``; 0 when it ran to the end. The temp dir is kept and printed."""
    if options.scenario not in STORIES:
        raise ValueError(f"unknown scenario {options.scenario!r}; choose one of {', '.join(SCENARIOS)}")
    timeline = Timeline(out or sys.stdout, color=options.color)
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="revbot-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    html_path = options.html.resolve() if options.html is not None else None
    settle = {"ready": READY_SETTLE}.get(options.scenario, READINESS_OFF_STAGE)
    stage = Stage(
        workdir,
        approve=options.approve,
        run_worker=options.scenario != "crash-recovery",
        readiness_settle=settle,
    )
    root = logging.getLogger()
    with (workdir / "revbot.log").open("a", encoding="utf-8", buffering=1) as log_stream:
        setup_logging(logging.INFO, stream=log_stream, json_lines=True)
        try:
            page = asyncio.run(_play(options, stage, timeline))
        except Exception as exc:
            logging.getLogger(__name__).exception("demo failed")
            message = f"revbot demo: the {options.scenario} scenario failed: {type(exc).__name__}: {exc}"
            print(message, file=sys.stderr)
            print(f"revbot demo: logs and database kept in {workdir}", file=sys.stderr)
            return 1
        finally:
            for handler in list(root.handlers):
                root.removeHandler(handler)
                with contextlib.suppress(Exception):
                    handler.close()
    if html_path is not None and page is not None:
        html_path.write_text(page, encoding="utf-8")
    timeline.heading("Done")
    timeline.plain(f"scenario {options.scenario} finished in {timeline.elapsed():.2f}s")
    timeline.plain(f"database: {stage.database_path}")
    timeline.plain(f"logs:     {workdir / 'revbot.log'} (JSON lines)")
    for extra in sorted(workdir.glob("worker-*.log")):
        timeline.plain(f"          {extra}")
    if html_path is not None:
        timeline.plain(f"html:     {html_path}")
    timeline.plain(f"temp dir: {workdir} (kept)")
    return 0
