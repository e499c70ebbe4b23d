"""Structured logs: context on every line, secrets never."""

from __future__ import annotations

import io
import json
import logging

import pytest

from app.settings.logs import Outage, log_context, setup_logging

TOKEN = "ghs_" + "a1B2" * 9
JWT = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiIxMjM0NSJ9.c2lnbmF0dXJlc2lnbmF0dXJl"


def test_json_lines_carry_the_delivery_context_and_mask_secrets() -> None:
    out = io.StringIO()
    setup_logging(logging.INFO, stream=out, json_lines=True)
    log = logging.getLogger("app.test")
    with log_context(delivery_id="d-1", event="pull_request", repo="octo/app", pr_number=7, job_id=3):
        log.info("minted %s and signed %s", TOKEN, JWT)
    log.info("outside")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert {k: first[k] for k in ("delivery_id", "event", "repo", "pr_number", "job_id")} == {
        "delivery_id": "d-1",
        "event": "pull_request",
        "repo": "octo/app",
        "pr_number": 7,
        "job_id": 3,
    }
    assert TOKEN not in first["msg"] and JWT not in first["msg"] and first["msg"].count("[redacted]") == 2
    assert "delivery_id" not in second and second["level"] == "info"


def test_terminal_lines_are_readable() -> None:
    out = io.StringIO()
    setup_logging(logging.INFO, stream=out, json_lines=False)
    with log_context(repo="octo/app", pr_number=7):
        logging.getLogger("app.test").warning("careful")
    line = out.getvalue().strip()
    assert "WARNING" in line and "app.test: careful" in line and line.endswith("[repo=octo/app pr_number=7]")


def test_an_outage_is_logged_once_when_it_starts_and_once_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    outage = Outage(logging.getLogger("app.test"), "claiming jobs", clock=lambda: now[0])
    caplog.set_level(logging.INFO)
    outage.recovered()  # nothing was down: nothing to say
    for attempt in range(50):
        now[0] += 1
        outage.failed(
            ConnectionRefusedError(111, f"refused, attempt {attempt}, token {TOKEN}"), during="polling"
        )
    assert outage.down and outage.failures == 50
    assert outage.error == "ConnectionRefusedError: [Errno 111] refused, attempt 49, token [redacted]"
    now[0] += 10
    outage.recovered()
    assert not outage.down and outage.error is None
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "WARNING",
            "claiming jobs failed while polling (ConnectionRefusedError: [Errno 111] refused, attempt 0, "
            "token [redacted]); retrying with backoff until it works",
        ),
        ("INFO", "claiming jobs works again after 59.0s (50 failed attempt(s))"),
    ]
