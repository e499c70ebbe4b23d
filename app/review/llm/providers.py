"""Model providers through their official SDKs (the optional extra ``revbot[llm]``).

``OpenAIProvider``: any OpenAI-compatible Chat Completions endpoint (OpenAI, Azure OpenAI,
OpenRouter, vLLM, Ollama, llama.cpp server, LiteLLM) with ``response_format`` JSON schema, or
plain JSON (``LLM_STRUCTURED_OUTPUT=json``) for servers without it. ``AnthropicProvider``: the
Messages API, with the answer's schema as the one tool the model must call (tool use is only
the output format: nothing is executed, the model has no other tool).

The SDKs' own retries are off (``max_retries=0``): ``with_retries`` retries timeouts,
connection errors, 408/409/429 and 5xx itself, honouring ``retry-after``, with an injectable
sleep, and logs every retry.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ...settings.config import LlmSettings
from .schema import OutputSchema

log = logging.getLogger(__name__)

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]

RETRY_STATUSES = frozenset({408, 409, 429})
MAX_RETRY_AFTER = 300.0  # a provider asking for a longer pause fails the request instead
BYTES_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class Completion:
    text: str  # the answer's JSON text
    input_tokens: int
    output_tokens: int


class ProviderError(Exception):
    """A request failed for good (after retries, or not retryable); the message is safe to show."""


class Provider(Protocol):
    name: str
    model: str

    async def complete(self, *, system: str, user: str, schema: OutputSchema, max_tokens: int) -> Completion:
        """One request; raises ProviderError."""
        ...

    async def count_tokens(self, *, system: str, user: str, schema: OutputSchema) -> int | None:
        """The provider's own count of a request's input tokens, or None (no tokenizer)."""
        ...

    async def aclose(self) -> None: ...


def estimate_tokens(text: str) -> int:
    """Conservative bytes/4, for providers whose SDK offers no tokenizer."""
    return len(text.encode()) // BYTES_PER_TOKEN + 1


def retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff(attempt: int, *, base: float = 1.0, cap: float = 60.0) -> float:
    return float(min(cap, base * 2 ** (attempt - 1)) * (0.5 + random.random() / 2))


def transient_delay(
    exc: BaseException, attempt: int, transient: tuple[type[BaseException], ...]
) -> float | None:
    """How long to wait before retrying after ``exc``, or None when it must not be retried."""
    if isinstance(exc, transient):
        return backoff(attempt)
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or not (status in RETRY_STATUSES or status >= 500):
        return None
    asked = retry_after(getattr(getattr(exc, "response", None), "headers", None))
    if asked is None:
        return backoff(attempt)
    return asked if asked <= MAX_RETRY_AFTER else None


def describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}{f' (HTTP {status})' if status else ''}"


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    retries: int,
    sleep: Sleep,
    transient: tuple[type[BaseException], ...],
    errors: tuple[type[Exception], ...],
    what: str,
) -> T:
    """``call()``, retried while its failure is transient (``errors``: the SDK's own base errors)."""
    attempt = 0
    while True:
        try:
            return await call()
        except errors as exc:
            attempt += 1
            delay = transient_delay(exc, attempt, transient)
            if delay is None or attempt > retries:
                log.error("model request %s failed: %s", what, describe(exc))
                raise ProviderError(describe(exc)) from exc
            log.warning(
                "model request %s: %s; retry %d of %d in %.1fs", what, describe(exc), attempt, retries, delay
            )
            await sleep(delay)


class _SdkProvider:
    """What both SDK providers share: their retry policy."""

    retries: int
    sleep: Sleep
    transient: tuple[type[BaseException], ...]
    errors: tuple[type[Exception], ...]

    async def _retrying(self, call: Callable[[], Awaitable[T]], what: str) -> T:
        return await with_retries(
            call,
            retries=self.retries,
            sleep=self.sleep,
            transient=self.transient,
            errors=self.errors,
            what=what,
        )


class OpenAIProvider(_SdkProvider):
    name = "openai"

    def __init__(self, settings: LlmSettings, *, sleep: Sleep = asyncio.sleep) -> None:
        import openai

        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "unused"
        self.client = openai.AsyncOpenAI(
            api_key=key,
            base_url=settings.llm_base_url,
            timeout=settings.llm_timeout_seconds,
            max_retries=0,
        )
        assert settings.llm_model is not None
        self.model = settings.llm_model
        self.structured = settings.llm_structured_output == "json_schema"
        self.temperature = settings.llm_temperature
        self.retries = settings.llm_max_retries
        self.sleep = sleep
        self.transient = (openai.APIConnectionError,)
        self.errors = (openai.APIError,)

    async def complete(self, *, system: str, user: str, schema: OutputSchema, max_tokens: int) -> Completion:
        extra: dict[str, Any] = {}
        if self.temperature is not None:  # reasoning models refuse any but their default
            extra["temperature"] = self.temperature
        if self.structured:
            extra["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema.name, "schema": schema.schema, "strict": True},
            }

        async def call() -> Any:
            return await self.client.chat.completions.create(
                model=self.model,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                max_completion_tokens=max_tokens,
                **extra,
            )

        response = await self._retrying(call, self.model)
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content or "") if choice is not None else ""
        usage = response.usage
        return Completion(
            text=text,
            input_tokens=int(usage.prompt_tokens) if usage else estimate_tokens(system + user),
            output_tokens=int(usage.completion_tokens) if usage else estimate_tokens(text),
        )

    async def count_tokens(self, *, system: str, user: str, schema: OutputSchema) -> int | None:
        return None  # the openai SDK has no tokenizer; callers estimate

    async def aclose(self) -> None:
        await self.client.close()


class AnthropicProvider(_SdkProvider):
    name = "anthropic"

    def __init__(self, settings: LlmSettings, *, sleep: Sleep = asyncio.sleep) -> None:
        import anthropic

        assert settings.llm_api_key is not None and settings.llm_model is not None
        self.client = anthropic.AsyncAnthropic(
            api_key=settings.llm_api_key.get_secret_value(),
            base_url=settings.llm_base_url,
            timeout=settings.llm_timeout_seconds,
            max_retries=0,
        )
        self.model = settings.llm_model
        self.retries = settings.llm_max_retries
        self.sleep = sleep
        self.transient = (anthropic.APIConnectionError,)
        self.errors = (anthropic.APIError,)

    @staticmethod
    def _tool(schema: OutputSchema) -> Any:
        from anthropic.types import ToolParam

        return ToolParam(name=schema.name, description=schema.description, input_schema=schema.schema)

    async def complete(self, *, system: str, user: str, schema: OutputSchema, max_tokens: int) -> Completion:
        async def call() -> Any:
            return await self.client.messages.create(
                model=self.model,
                system=system,
                messages=[{"role": "user", "content": user}],
                max_tokens=max_tokens,
                tools=[self._tool(schema)],
                tool_choice={"type": "tool", "name": schema.name},
            )

        response = await self._retrying(call, self.model)
        text = ""
        for block in response.content:
            if block.type == "tool_use" and block.name == schema.name:
                text = json.dumps(block.input)
                break
            if block.type == "text":
                text += block.text
        return Completion(
            text=text,
            input_tokens=int(response.usage.input_tokens),
            output_tokens=int(response.usage.output_tokens),
        )

    async def count_tokens(self, *, system: str, user: str, schema: OutputSchema) -> int | None:
        async def call() -> Any:
            return await self.client.messages.count_tokens(
                model=self.model,
                system=system,
                messages=[{"role": "user", "content": user}],
                tools=[self._tool(schema)],
                tool_choice={"type": "tool", "name": schema.name},
            )

        counted = await self._retrying(call, "count_tokens")
        return int(counted.input_tokens)

    async def aclose(self) -> None:
        await self.client.close()


def make_provider(settings: LlmSettings, *, sleep: Sleep = asyncio.sleep) -> Provider:
    if settings.llm_provider == "anthropic":
        return AnthropicProvider(settings, sleep=sleep)
    return OpenAIProvider(settings, sleep=sleep)


async def ping(provider: Provider) -> tuple[float, str]:
    """One tiny request (``doctor``): the seconds it took and what the model said."""
    started = time.perf_counter()
    reply = await provider.complete(
        system="Answer with a JSON object.",
        user='Reply with {"status": "fixed", "reason": "ok"}.',
        schema=PING_SCHEMA,
        max_tokens=32,
    )
    return time.perf_counter() - started, reply.text.strip()[:80]


PING_SCHEMA = OutputSchema(
    name="ping",
    description="Answer the health check.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["status", "reason"],
        "properties": {"status": {"type": "string"}, "reason": {"type": "string"}},
    },
)
