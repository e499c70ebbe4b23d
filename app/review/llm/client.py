"""The model behind a concurrency gate: every request of the reviewer and of the thread judge
goes through one client, which keeps the provider's health (for ``/healthz``) and the tokens
used (for ``eval``)."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from . import prompt
from .providers import Completion, Provider, ProviderError
from .schema import OutputSchema


@dataclass(slots=True)
class Tally:
    """Requests and tokens of one piece of work (a review, a judgement)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def cache_key(*parts: str) -> str:
    """What an answer is remembered by: a digest of everything that was asked."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


class ModelClient:
    def __init__(
        self, provider: Provider, *, concurrency: int, clock: Callable[[], float] = time.time
    ) -> None:
        self.provider = provider
        self.clock = clock
        self._gate = asyncio.Semaphore(concurrency)
        self.tokens_used = 0  # since this client was made
        self._last_ok: float | None = None
        self._failing: tuple[float, str] | None = None  # since when, and the error

    def health(self) -> dict[str, object]:
        """Whether the provider's last request succeeded."""
        if self._failing is not None:
            since, error = self._failing
            return {"status": "failing", "since": since, "error": error, "model": self.provider.model}
        return {"status": "ok" if self._last_ok else "unused", "model": self.provider.model}

    def _record(self, error: ProviderError | None) -> None:
        if error is None:
            self._last_ok, self._failing = self.clock(), None
        elif self._failing is None:
            self._failing = (self.clock(), str(error))

    async def ask(
        self, request: prompt.Request, schema: OutputSchema, max_tokens: int, tally: Tally
    ) -> Completion:
        """One completion, counted in ``tally``; raises ProviderError."""
        async with self._gate:
            try:
                reply = await self.provider.complete(
                    system=request.system, user=request.user, schema=schema, max_tokens=max_tokens
                )
            except ProviderError as exc:
                self._record(exc)
                raise
        self._record(None)
        tally.requests += 1
        tally.input_tokens += reply.input_tokens
        tally.output_tokens += reply.output_tokens
        self.tokens_used += reply.input_tokens + reply.output_tokens
        return reply

    async def aclose(self) -> None:
        await self.provider.aclose()
