"""Micro-benchmark: the webhook endpoint's envelope decode (``app.web.endpoint``).

The endpoint decodes only the fields the ledger reads (msgspec). Its envelope struct is built
from ``events.NUMBER_AT`` (the one table of where payloads put the PR number); this compares it
with the hand-written struct it replaced, decoding every GitHub example payload of the test
fixtures and a ~25 KB ``pull_request`` delivery (what ``bench/webhook_ack.py`` sends), with a
full ``json.loads`` for scale. Rounds alternate between the decoders and the best CPU time of
each is kept, so a busy machine slows both alike. A script, not a test.

    python bench/envelope_decode.py [--rounds 15] [--number 2000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.web import endpoint  # noqa: E402 - after the path is set

EXAMPLES = ROOT / "tests" / "fixtures" / "github" / "webhooks" / "examples"
_OTHER = str | int | float | bool | list[Any] | None


class _Numbered(msgspec.Struct, omit_defaults=True):
    number: Any = None


class _Check(msgspec.Struct, omit_defaults=True):
    pull_requests: Any = None


class _Repository(msgspec.Struct, omit_defaults=True):
    full_name: Any = None


class _Installation(msgspec.Struct, omit_defaults=True):
    id: Any = None


class WrittenEnvelope(msgspec.Struct, omit_defaults=True):
    """The struct as it was written by hand before ``NUMBER_AT``."""

    action: Any = None
    hook_id: Any = None
    number: Any = None
    installation: _Installation | _OTHER = None
    repository: _Repository | _OTHER = None
    pull_request: _Numbered | _OTHER = None
    issue: _Numbered | _OTHER = None
    check_run: _Check | _OTHER = None
    check_suite: _Check | _OTHER = None


def bodies() -> dict[str, bytes]:
    found = {p.parent.name + "/" + p.name: p.read_bytes() for p in sorted(EXAMPLES.glob("*/*.json"))}
    pull = json.loads((EXAMPLES / "pull_request" / "opened.payload.json").read_bytes())
    pull["pull_request"]["body"] = "x" * 20_000  # a long description, as real PRs have
    found["pull_request (25 KB)"] = json.dumps(pull).encode()
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--number", type=int, default=2000)
    args = parser.parse_args()
    every = list(bodies().values())
    big = bodies()["pull_request (25 KB)"]
    written = msgspec.json.Decoder(WrittenEnvelope)
    generated = endpoint._ENVELOPE
    for body in every:  # the same fields either way
        assert msgspec.to_builtins(written.decode(body)) == msgspec.to_builtins(generated.decode(body))
    cases: dict[str, tuple[Callable[[], object], int]] = {
        "written, all examples": (lambda: [written.decode(b) for b in every], args.number // 20),
        "generated, all examples": (lambda: [generated.decode(b) for b in every], args.number // 20),
        "json.loads, all examples": (lambda: [json.loads(b) for b in every], args.number // 20),
        "written, 25 KB pull_request": (lambda: written.decode(big), args.number),
        "generated, 25 KB pull_request": (lambda: generated.decode(big), args.number),
        "json.loads, 25 KB pull_request": (lambda: json.loads(big), args.number),
    }
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(args.rounds):
        for name, (fn, number) in cases.items():
            elapsed = timeit.Timer(fn, timer=time.process_time).timeit(number) / number
            best[name] = min(best[name], elapsed)
    print(f"{len(every)} example payloads; best of {args.rounds} rounds, CPU time per decode")
    for name, seconds in best.items():
        print(f"{name:<34} {seconds * 1e6:>9.2f} us")


if __name__ == "__main__":
    main()
