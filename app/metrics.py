"""Prometheus metrics, one registry for the process (served at ``GET /metrics`` by
``app/web/metrics.py``).

Counters and histograms are updated where things happen (one call at each point); the queue's
gauges are read from the database when scraped, so every process reports the shared queue as
it is now. Labels are bounded sets: an event name is only used after the delivery's signature
verified (before that, anyone could invent one), installations are few. This module imports
nothing of the bot, so the GitHub client and the worker count without loading the store.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    gc_collector,
    platform_collector,
    process_collector,
)

REGISTRY = CollectorRegistry()
process_collector.ProcessCollector(registry=REGISTRY)
platform_collector.PlatformCollector(registry=REGISTRY)
gc_collector.GCCollector(registry=REGISTRY)

UNVERIFIED_EVENT = "unverified"  # the event label of a delivery refused before its signature checked


@functools.lru_cache(maxsize=4096)
def child(metric: Any, *values: str) -> Any:
    """``metric.labels(*values)``, remembered: the webhook endpoint and the worker count every
    delivery and job, and ``labels`` checks its arguments and takes a lock each time."""
    return metric.labels(*values)


DELIVERIES = Counter(
    "revbot_webhook_deliveries",
    "Webhook deliveries by event and outcome (accepted, duplicate, ping, recovered, refused_*, error).",
    ["event", "outcome"],
    registry=REGISTRY,
)
WEBHOOK_PREVIOUS_SECRET = Counter(
    "revbot_webhook_previous_secret",
    "Deliveries whose signature matched WEBHOOK_SECRET_PREVIOUS, not WEBHOOK_SECRET (a rotation).",
    registry=REGISTRY,
)
QUEUE_JOBS = Gauge(
    "revbot_queue_jobs",
    "Unfinished jobs by status (waiting, queued, running).",
    ["status"],
    registry=REGISTRY,
)
QUEUE_DEPTH = Gauge(
    "revbot_queue_depth", "Jobs not started yet (queued, or waiting behind their subject).", registry=REGISTRY
)
QUEUE_OLDEST_DUE = Gauge(
    "revbot_queue_oldest_due_age_seconds",
    "How long the oldest queued job that is due has waited for a worker (0 when none).",
    registry=REGISTRY,
)
JOB_DURATION = Histogram(
    "revbot_job_duration_seconds",
    "One attempt of a job, from claim to outcome (done, skipped, failed, retried).",
    ["outcome"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
    registry=REGISTRY,
)
JOB_LATENCY = Histogram(
    "revbot_job_latency_seconds",
    "From the delivery's arrival to its job's final outcome.",
    ["outcome"],
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
    registry=REGISTRY,
)
GITHUB_CALLS = Counter(
    "revbot_github_api_calls",
    "Requests to GitHub's REST and GraphQL APIs by HTTP status (error: no answer).",
    ["status"],
    registry=REGISTRY,
)
GITHUB_BUDGET = Counter(
    "revbot_github_requests",
    "Answers from GitHub by whether they count against the primary rate limit: counted, or "
    "not_modified (a conditional request answered 304, which GitHub does not count).",
    ["budget"],
    registry=REGISTRY,
)
RATE_LIMIT_REMAINING = Gauge(
    "revbot_github_rate_limit_remaining",
    "GitHub's x-ratelimit-remaining from the latest answer, per installation (app: JWT calls).",
    ["installation", "resource"],
    registry=REGISTRY,
)
REVIEWS = Counter("revbot_reviews", "Reviews posted, by verdict.", ["verdict"], registry=REGISTRY)
THREADS_RESOLVED = Counter("revbot_threads_resolved", "Review threads the bot resolved.", registry=REGISTRY)
RECOVERED = Counter(
    "revbot_recovered_deliveries",
    "Deliveries GitHub failed to deliver that were read back from its delivery log and recorded.",
    registry=REGISTRY,
)
RECOVERY_SWEEPS = Counter(
    "revbot_recovery_sweeps",
    "Sweeps of GitHub's delivery log by outcome (ok, skipped: another process holds the lock, error).",
    ["outcome"],
    registry=REGISTRY,
)
PAYLOADS_EMPTIED = Counter(
    "revbot_payloads_emptied", "Handled deliveries whose payload retention ran out.", registry=REGISTRY
)


def github_answer(status: int | str, headers: Mapping[str, str] | None, installation: int | None) -> None:
    """Count one request to GitHub and remember the rate limit it reported."""
    GITHUB_CALLS.labels(status=str(status)).inc()
    if isinstance(status, int):
        GITHUB_BUDGET.labels(budget="not_modified" if status == 304 else "counted").inc()
    if not headers:
        return
    lowered = {k.lower(): v for k, v in headers.items()}
    remaining = lowered.get("x-ratelimit-remaining")
    if remaining is not None and remaining.isdigit():
        RATE_LIMIT_REMAINING.labels(
            installation=str(installation) if installation is not None else "app",
            resource=lowered.get("x-ratelimit-resource", "core"),
        ).set(int(remaining))
