"""Fake model providers for the tests: an OpenAI-compatible Chat Completions server and an
Anthropic Messages server, in aiohttp, answering what a test scripts. The real SDKs talk to them
over real HTTP, so request and response shapes are the SDKs' own.

A script is a function from the request (``Asked``: the schema asked for, the system and user
text) to a ``Reply``: a JSON answer, raw text, or an HTTP error with headers.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

FILE_HEADER = re.compile(r"^### FILE (?P<path>\S+) \(", re.MULTILINE)
ADDED_LINE = re.compile(r"^\s*(?P<line>\d+) \+ (?P<text>.*)$")
CANARY = re.compile(r"check value is (?P<canary>[0-9a-f]+)\.")


@dataclass(frozen=True)
class Asked:
    schema: str  # "report_findings", "judge_thread", "ping"; "" when no schema was sent
    system: str
    user: str
    raw: dict[str, Any]

    def canary(self) -> str:
        """The check value the system part asks the answer to echo ("" when there is none)."""
        found = CANARY.search(self.system)
        return found.group("canary") if found else ""

    def files(self) -> dict[str, list[tuple[int, str]]]:
        """Each file section of a review request: its added lines (head number, text)."""
        out: dict[str, list[tuple[int, str]]] = {}
        current: list[tuple[int, str]] | None = None
        for line in self.user.splitlines():
            header = FILE_HEADER.match(line)
            if header:
                current = out.setdefault(header.group("path"), [])
                continue
            added = ADDED_LINE.match(line)
            if added and current is not None:
                current.append((int(added.group("line")), added.group("text")))
        return out


@dataclass(frozen=True)
class Reply:
    answer: Any = None  # a JSON-able answer (OpenAI: message content; Anthropic: tool input)
    text: str | None = None  # raw text instead (malformed output)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


Script = Callable[[Asked], Reply]


def answer(
    asked: Asked, findings: Sequence[dict[str, Any]] = (), *, steering: Sequence[dict[str, Any]] = ()
) -> Reply:
    """An obedient model's answer: the request's canary echoed, and every file of the request in
    the coverage list ("findings" where it reports some, "nothing_found" otherwise)."""
    flagged = {f["path"] for f in findings}
    files = [
        {"path": path, "status": "findings" if path in flagged else "nothing_found"} for path in asked.files()
    ]
    return Reply(
        {"canary": asked.canary(), "files": files, "findings": list(findings), "steering": list(steering)}
    )


def no_findings(asked: Asked) -> Reply:
    if asked.schema == "judge_thread":
        return Reply({"status": "cannot_tell", "reason": "no idea"})
    return answer(asked)


def proposed(path: str, line: int, **extra: Any) -> dict[str, Any]:
    """One finding as a model answers it (a blocker in logic unless ``extra`` says otherwise)."""
    return {
        "path": path,
        "line": line,
        "end_line": None,
        "severity": "blocker",
        "category": "logic",
        "confidence": 0.8,
        "message": "Wrong.",
        "suggestion": None,
        **extra,
    }


def flag_marked_lines(asked: Asked, marker: str = "# BUG") -> Reply:
    """A model that reports every added line holding ``marker`` as a blocker."""
    if asked.schema == "judge_thread":
        return Reply({"status": "cannot_tell", "reason": "no idea"})
    findings = [
        proposed(path, number, confidence=0.9, message=f"This looks wrong: {text.strip()[:40]}")
        for path, lines in asked.files().items()
        for number, text in lines
        if marker in text
    ]
    return answer(asked, findings)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FakeModelServer:
    """Both providers' endpoints on one loopback port."""

    def __init__(self, script: Script = no_findings) -> None:
        self.script = script
        # Awaited before each completion is answered (a test holds requests there); with the
        # number of requests being answered at that moment.
        self.hold: Callable[[int], Awaitable[None]] | None = None
        self.in_flight = 0
        self.most_in_flight = 0
        self.asked: list[Asked] = []  # every completion request, in arrival order
        self.counted: list[Asked] = []  # Anthropic count_tokens requests
        self.port = free_port()
        self._runner: web.AppRunner | None = None

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reviews(self) -> list[Asked]:
        return [a for a in self.asked if a.schema == "report_findings"]

    async def start(self) -> FakeModelServer:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_post("/v1/messages/count_tokens", self._count)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @staticmethod
    def _error(reply: Reply) -> web.Response:
        body: dict[str, Any] = {
            "error": {"type": "rate_limit_error" if reply.status == 429 else "api_error", "message": "no"}
        }
        if reply.status >= 500:
            body = {"type": "error", **body}
        return web.json_response(body, status=reply.status, headers=reply.headers)

    async def _held(self) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if self.hold is not None:
                await self.hold(self.in_flight)
        finally:
            self.in_flight -= 1

    async def _openai(self, request: web.Request) -> web.Response:
        data = await request.json()
        await self._held()
        messages = data["messages"]
        fmt = data.get("response_format") or {}
        asked = Asked(
            schema=(fmt.get("json_schema") or {}).get("name", ""),
            system=next((m["content"] for m in messages if m["role"] == "system"), ""),
            user=next((m["content"] for m in messages if m["role"] == "user"), ""),
            raw=data,
        )
        self.asked.append(asked)
        reply = self.script(asked)
        if reply.status != 200:
            return self._error(reply)
        content = reply.text if reply.text is not None else json.dumps(reply.answer)
        return web.json_response(
            {
                "id": f"chatcmpl-{len(self.asked)}",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": data["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": len(asked.system + asked.user) // 4,
                    "completion_tokens": len(content) // 4,
                    "total_tokens": len(asked.system + asked.user + content) // 4,
                },
            },
            headers=reply.headers,
        )

    def _anthropic_asked(self, data: dict[str, Any]) -> Asked:
        tools = data.get("tools") or []
        user = data["messages"][0]["content"]
        return Asked(
            schema=tools[0]["name"] if tools else "",
            system=data.get("system") or "",
            user=user if isinstance(user, str) else json.dumps(user),
            raw=data,
        )

    async def _count(self, request: web.Request) -> web.Response:
        asked = self._anthropic_asked(await request.json())
        self.counted.append(asked)
        return web.json_response({"input_tokens": len((asked.system + asked.user).encode()) // 4})

    async def _anthropic(self, request: web.Request) -> web.Response:
        data = await request.json()
        await self._held()
        asked = self._anthropic_asked(data)
        self.asked.append(asked)
        reply = self.script(asked)
        if reply.status != 200:
            return self._error(reply)
        if reply.text is not None:
            content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}]
            stop = "end_turn"
        else:
            content = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{len(self.asked)}",
                    "name": asked.schema,
                    "input": reply.answer,
                }
            ]
            stop = "tool_use"
        return web.json_response(
            {
                "id": f"msg_{len(self.asked)}",
                "type": "message",
                "role": "assistant",
                "model": data["model"],
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": len(asked.system + asked.user) // 4,
                    "output_tokens": len(json.dumps(content)) // 4,
                },
            },
            headers=reply.headers,
        )
