"""The printed timeline: elapsed seconds, who (a person, GitHub, or the bot), and what they did.

``Timeline`` formats lines. ``Narrator`` watches what the fake GitHub records (every API call
the bot makes, every webhook GitHub sends) and tells the bot's side of the story from it: what
the bot wrote to GitHub, with the text it posted (hidden ``<!-- revbot:... -->`` markers
removed), and which webhooks went out. It reads the fake's records only; it never asks the bot.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..events import ReviewState
from ..sandbox import Call, FakeGitHub
from ..sandbox.server import WRITE_METHODS
from .runner import StampedList

# The readiness comment's marker when the comment no longer states a call (``readiness.memory``).
QUIET_READINESS = '"quiet":true'
READINESS_MARKER = "revbot:readiness"

HIDDEN_MARKER = re.compile(r"<!--\s*revbot:.*?-->", re.DOTALL)
ACTOR_WIDTH = 12
INDENT = " " * (9 + ACTOR_WIDTH + 1)

_STYLES = {
    "human": "\033[1;36m",
    "github": "\033[35m",
    "bot": "\033[1;32m",
    "demo": "\033[2m",
    "dim": "\033[2m",
    "bad": "\033[1;31m",
    "good": "\033[1;32m",
}
_RESET = "\033[0m"

VERDICTS = {
    "APPROVE": "APPROVED",
    "REQUEST_CHANGES": "CHANGES REQUESTED",
    "COMMENT": "COMMENTED",
}


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """PR content is untrusted: no terminal control sequences reach the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def strip_markers(text: str | None) -> str:
    """Text as a person sees it on GitHub: the bot's hidden HTML-comment markers removed."""
    cleaned = HIDDEN_MARKER.sub("", text or "")
    lines = [line.rstrip() for line in cleaned.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    out: list[str] = []
    for line in lines:  # collapse runs of blank lines left where markers were
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out)


_SUGGESTION = re.compile(r"^```suggestion\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def terminal_text(text: str | None) -> str:
    """A comment for the terminal: markers removed, a suggested change said in words."""

    def suggestion(match: re.Match[str]) -> str:
        lines = match.group(1).rstrip("\n")
        if not lines:
            return "(suggested change: delete this line)"
        return "(suggested change:)\n" + "\n".join(f"    {line}" for line in lines.split("\n"))

    return _SUGGESTION.sub(suggestion, strip_markers(text))


def short(sha: str | None) -> str:
    return (sha or "")[:7]


class Timeline:
    """Prints ``  0.41s  alice        requested a review from revbot`` lines, in order."""

    def __init__(self, out: TextIO, *, color: bool | None = None, start: float | None = None) -> None:
        self.out = out
        if color is None:
            color = out.isatty() and not os.environ.get("NO_COLOR")
        self.color = color
        self.start = time.time() if start is None else start

    def _paint(self, text: str, style: str | None) -> str:
        if not self.color or style is None:
            return text
        return f"{_STYLES.get(style, '')}{text}{_RESET}"

    def elapsed(self, at: float | None = None) -> float:
        return (time.time() if at is None else at) - self.start

    def say(
        self, actor: str, text: str, *, kind: str, at: float | None = None, style: str | None = None
    ) -> None:
        stamp = f"{self.elapsed(at):6.2f}s"
        first, *rest = printable(text).split("\n") if text else [""]
        who = self._paint(f"{actor:<{ACTOR_WIDTH}}", kind)
        print(f"{stamp}  {who} {self._paint(first, style)}", file=self.out)
        for line in rest:
            print(f"{INDENT}{self._paint(line, style)}" if line else "", file=self.out)
        self.out.flush()

    def more(self, text: str, *, indent: int = 0, style: str | None = None) -> None:
        """Continuation lines under the last entry."""
        pad = INDENT + " " * indent
        for line in printable(text).split("\n"):
            print(f"{pad}{self._paint(line, style)}" if line else "", file=self.out)
        self.out.flush()

    def heading(self, text: str) -> None:
        print("", file=self.out)
        print(self._paint(f"== {text}", "dim"), file=self.out)
        self.out.flush()

    def plain(self, text: str = "", *, style: str | None = None) -> None:
        print(self._paint(text, style), file=self.out)
        self.out.flush()


@dataclass
class _Item:
    at: float
    kind: str  # "call" | "hook"
    index: int  # in the fake's calls or webhooks_sent


@dataclass
class StepTally:
    """What the bot did between two human actions: API reads, writes, and echo webhooks by name."""

    reads: int = 0
    writes: int = 0
    echoes: Counter[str] = field(default_factory=Counter)


class Narrator:
    """Turns the fake's records into timeline lines as they happen (a background task polls them)."""

    STALE_CALL = 1.0  # a call unanswered this long no longer holds back later lines

    def __init__(self, timeline: Timeline, fake: FakeGitHub, *, bot_login: str) -> None:
        self.timeline = timeline
        self.fake = fake
        self.bot_login = bot_login
        assert isinstance(fake.calls, StampedList) and isinstance(fake.webhooks_sent, StampedList)
        self.calls: StampedList[Call] = fake.calls
        self.hooks: StampedList[tuple[str, str, dict[str, Any], int]] = fake.webhooks_sent
        self._next_call = 0
        self._next_hook = 0
        self._skipped_calls: set[int] = set()
        self.tally = StepTally()
        self.paused = False  # a story may hold the lines back briefly, to keep the order
        self._task: asyncio.Task[None] | None = None

    # ---------------------------------------------------------------- running
    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="demo narrator")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.poll(final=True)

    async def _run(self) -> None:
        while True:
            if not self.paused:
                self.poll()
            await asyncio.sleep(0.02)

    def poll(self, *, final: bool = False) -> None:
        """Print everything recorded so far that can no longer be preceded by something unseen."""
        now = time.time()
        cutoff = float("inf")
        ready: list[_Item] = []
        index = self._next_call
        while index < len(self.calls):
            call = self.calls[index]
            if call.status == 0 and not final and index not in self._skipped_calls:
                if now - self.calls.time_of(index) < self.STALE_CALL:
                    cutoff = self.calls.time_of(index)
                    break
                self._skipped_calls.add(index)  # print it when it is answered, out of order
            elif call.status != 0 or final:
                ready.append(_Item(self.calls.time_of(index), "call", index))
            index += 1
        for late in sorted(self._skipped_calls):
            if self.calls[late].status != 0:
                ready.append(_Item(self.calls.time_of(late), "call", late))
                self._skipped_calls.discard(late)
        self._next_call = index
        hook_index = self._next_hook
        while hook_index < len(self.hooks) and self.hooks.time_of(hook_index) < cutoff:
            ready.append(_Item(self.hooks.time_of(hook_index), "hook", hook_index))
            hook_index += 1
        self._next_hook = hook_index
        for item in sorted(ready, key=lambda i: (i.at, i.kind != "call", i.index)):
            if item.kind == "call":
                self._narrate_call(self.calls[item.index], item.at)
            else:
                self._narrate_hook(self.hooks[item.index], item.at)

    def end_step(self) -> StepTally:
        """Close a step: say so if the bot wrote nothing, and sum up the echo webhooks (they are
        not shown one by one). Returns the step's tally."""
        self.poll()
        tally = self.tally
        if tally.writes == 0:
            self.timeline.say(
                self.bot_login, f"made no write ({tally.reads} API read(s))", kind="bot", style="dim"
            )
        echoes = tally.echoes
        if echoes:
            parts = ", ".join(f"{n}x {name}" if n > 1 else name for name, n in sorted(echoes.items()))
            total = sum(echoes.values())
            self.timeline.say(
                "GitHub",
                f"echoed {total} webhook(s) of the bot's own writes (sender {self.bot_login}): {parts}",
                kind="github",
                style="dim",
            )
        self.tally = StepTally()
        return tally

    # ---------------------------------------------------------------- webhooks
    def _narrate_hook(self, record: tuple[str, str, dict[str, Any], int], at: float) -> None:
        event, delivery_id, payload, status = record
        action = payload.get("action")
        name = f"{event}.{action}" if action else event
        sender = (payload.get("sender") or {}).get("login")
        if sender == self.bot_login:
            self.tally.echoes[name] += 1
            return
        answer = {200: "200 OK", 202: "202 Accepted"}.get(status, str(status))
        self.timeline.say(
            "GitHub",
            f"delivered {name} (sender {sender}, id {delivery_id[:8]}) -> bot answered {answer}",
            kind="github",
            at=at,
            style="dim",
        )

    # ---------------------------------------------------------------- calls
    def _narrate_call(self, call: Call, at: float) -> None:
        if call.auth is None:  # not the bot (the story's own look-ups carry no credentials)
            return
        if not is_write(call):
            self.tally.reads += 1
            return
        self.tally.writes += 1
        for text, style in self._describe(call):
            self._say(text, at, style=style)

    def _say(self, text: str, at: float, *, style: str | None = None) -> None:
        self.timeline.say(self.bot_login, text, kind="bot", at=at, style=style)

    def _status_note(self, call: Call) -> str:
        if 200 <= call.status < 300:
            return ""
        message = call.response.get("message") if isinstance(call.response, dict) else None
        return f"  -> GitHub answered {call.status}" + (f": {message}" if message else "")

    def _describe(self, call: Call) -> Iterator[tuple[str, str | None]]:
        body = call.body if isinstance(call.body, dict) else {}
        path = call.path
        note = self._status_note(call)
        bad = "bad" if note else None
        world = self.fake.world
        if call.path == "/graphql":
            if "resolveReviewThread" in (call.graphql or ""):
                thread_id = str((call.variables or {}).get("threadId"))
                yield f"resolved the thread on {self._thread_place(thread_id)}{note}", bad or "good"
            else:
                yield f"GraphQL mutation{note}", bad
            return
        # GitHub answers 200 instead of 201 for a reaction that was already there.
        again = " (already there: GitHub answered 200)" if call.status == 200 and "reactions" in path else ""
        if m := re.fullmatch(r"/repos/[^/]+/[^/]+/issues/(\d+)/reactions", path):
            yield f"reacted :{body.get('content')}: to PR #{m[1]}{again}{note}", bad
        elif m := re.fullmatch(r"/repos/[^/]+/[^/]+/issues/comments/(\d+)/reactions", path):
            comment = world.issue_comments.get(int(m[1]))
            whose = f"{comment.user}'s comment" if comment else f"comment {m[1]}"
            yield f"reacted :{body.get('content')}: to {whose}{again}{note}", bad
        elif m := re.fullmatch(r"/repos/[^/]+/[^/]+/pulls/comments/(\d+)/reactions", path):
            yield f"reacted :{body.get('content')}: to review comment {m[1]}{again}{note}", bad
        elif re.fullmatch(r"/repos/[^/]+/[^/]+/check-runs", path) and call.method == "POST":
            yield f'started check run "{body.get("name")}" ({body.get("status", "queued")}){note}', bad
        elif re.fullmatch(r"/repos/[^/]+/[^/]+/check-runs/\d+", path):
            output = body.get("output") or {}
            annotations = len(output.get("annotations") or []) if isinstance(output, dict) else 0
            if body.get("status") == "completed" or body.get("conclusion"):
                title = output.get("title") if isinstance(output, dict) else None
                extra = f", {annotations} annotation(s)" if annotations else ""
                yield f"completed its check run: {body.get('conclusion')}: {title}{extra}{note}", bad
            elif body.get("status") == "in_progress":
                yield f"found its check run for this head and set it in_progress again{note}", bad
            elif body.get("status"):
                yield f"set its check run {body.get('status')}{note}", bad
            else:
                yield f"added {annotations} annotation(s) to its check run{note}", bad
        elif m := re.fullmatch(r"/repos/[^/]+/[^/]+/pulls/(\d+)/reviews", path):
            yield from self._describe_review(call, body, note)
        elif (
            re.fullmatch(r"/repos/[^/]+/[^/]+/pulls/\d+/requested_reviewers", path)
            and call.method == "DELETE"
        ):
            who = ", ".join(body.get("reviewers") or [])
            yield f"removed {who} from the requested reviewers{note}", bad
        elif m := re.fullmatch(r"/repos/[^/]+/[^/]+/pulls/\d+/reviews/(\d+)/dismissals", path):
            yield f"dismissed its own review {m[1]}: {body.get('message')}{note}", bad or "good"
        elif m := re.fullmatch(r"/repos/[^/]+/[^/]+/pulls/\d+/comments/(\d+)/replies", path):
            root = world.review_comments.get(int(m[1]))
            where = f"{root.path}:{root.original_line}" if root else f"comment {m[1]}"
            yield f"replied in the thread on {where}:{note}\n" + _quote(strip_markers(body.get("body"))), bad
        elif m := re.fullmatch(r"/repos/[^/]+/[^/]+/issues/(\d+)/comments", path):
            yield f"commented on PR #{m[1]}:{note}\n" + _quote(strip_markers(body.get("body"))), bad
        elif re.fullmatch(r"/repos/[^/]+/[^/]+/issues/comments/\d+", path) and call.method == "PATCH":
            raw = str(body.get("body") or "")
            shown = strip_markers(raw)
            if READINESS_MARKER not in raw:
                yield f"edited its comment:{note}\n" + _quote(shown), bad
            elif QUIET_READINESS in raw or not shown:
                yield f"updated what its readiness comment remembers (it states no call now){note}", bad
            else:
                yield f"edited its readiness comment: {shown.splitlines()[0]}{note}", bad
        else:
            yield f"{call.method} {path} -> {call.status}", bad

    def _describe_review(
        self, call: Call, body: dict[str, Any], note: str
    ) -> Iterator[tuple[str, str | None]]:
        event = str(body.get("event") or ReviewState.PENDING)  # no event: the review stays pending
        verdict = VERDICTS.get(event, event)
        comments = body.get("comments") or []
        style = {"APPROVE": "good", "REQUEST_CHANGES": "bad"}.get(event)
        head = f"submitted a review: {verdict} at {short(body.get('commit_id'))}"
        head += f" with {len(comments)} inline comment(s){note}" if comments else note
        text = [head]
        summary = strip_markers(body.get("body"))
        if summary:
            text.append(_quote(summary))
        yield "\n".join(text), style
        for comment in comments:
            place = f"{comment.get('path')}:{comment.get('line')}"
            self.timeline.more(f"- {place}", indent=2)
            self.timeline.more(terminal_text(comment.get("body")), indent=4)

    def _thread_place(self, thread_id: str) -> str:
        thread = self.fake.world.threads.get(thread_id)
        if thread is None or not thread.comment_ids:
            return thread_id
        root = self.fake.world.review_comments[thread.comment_ids[0]]
        return f"{root.path}:{root.original_line}"


def is_write(call: Call) -> bool:
    """What ``FakeGitHub.writes()`` counts: REST writes other than token minting, and mutations."""
    if call.path == "/graphql":
        return call.is_graphql_mutation
    if call.method not in WRITE_METHODS:
        return False
    return not (call.method == "POST" and re.fullmatch(r"/app/installations/[^/]+/access_tokens", call.path))


def _quote(text: str) -> str:
    return "\n".join(f"  | {line}" if line else "  |" for line in text.split("\n"))
