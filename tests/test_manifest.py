"""The GitHub App manifest asks for the events the handlers need (and the permissions GitHub wants for
them); the Procfile runs the web server and the worker."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
LEVELS = {"read", "write", "admin"}
# What each default event needs before GitHub will deliver it to an App.
EVENT_NEEDS = {
    "pull_request": "pull_requests",
    "pull_request_review": "pull_requests",
    "pull_request_review_comment": "pull_requests",
    "pull_request_review_thread": "pull_requests",
    "issue_comment": "issues",
    "check_run": "checks",
    "check_suite": "checks",
    "status": "statuses",
}


def test_manifest_names_the_default_events_and_permissions() -> None:
    manifest = yaml.safe_load((ROOT / "app.yml").read_text())
    assert set(manifest) <= {
        "name",
        "url",
        "hook_attributes",
        "redirect_url",
        "callback_urls",
        "setup_url",
        "description",
        "public",
        "default_events",
        "default_permissions",
        "request_oauth_on_install",
        "setup_on_update",
    }
    assert manifest["name"] and manifest["url"].startswith("https://")
    assert manifest["hook_attributes"]["url"].endswith("/api/github/webhooks")
    assert manifest["default_events"] == list(EVENT_NEEDS)
    assert manifest["default_permissions"] == {
        "pull_requests": "write",
        "contents": "read",
        "issues": "write",
        "checks": "write",
        "metadata": "read",
        "statuses": "read",
    }
    for event in manifest["default_events"]:
        assert manifest["default_permissions"][EVENT_NEEDS[event]] in LEVELS


def test_procfile_runs_the_web_server_and_the_worker() -> None:
    assert (ROOT / "Procfile").read_text().splitlines() == [
        "web: python -m app serve",
        "worker: python -m app worker",
    ]
