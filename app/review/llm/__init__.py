"""The language-model reviewer (``REVIEWER=llm``) behind the same engine: see ``reviewer``."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .packing import Limits
from .reviewer import LlmReviewer

if TYPE_CHECKING:
    from ...settings.config import LlmSettings, ReviewerSettings
    from ..core.model import Reviewer
    from .memory import Memory
    from .providers import Sleep

__all__ = ["Limits", "LlmReviewer", "build_reviewer", "configured_reviewer", "limits_from"]


def limits_from(settings: LlmSettings) -> Limits:
    return Limits(
        max_input_tokens=settings.llm_max_input_tokens,
        max_output_tokens=settings.llm_max_output_tokens,
        concurrency=settings.llm_concurrency,
        max_tokens_per_review=settings.llm_max_tokens_per_review,
        daily_token_budget=settings.llm_daily_token_budget,
        pull_daily_token_budget=settings.llm_pull_daily_token_budget,
        person_daily_token_budget=settings.llm_person_daily_token_budget,
        price_input_per_mtok=settings.llm_price_input_per_mtok,
        price_output_per_mtok=settings.llm_price_output_per_mtok,
    )


def build_reviewer(
    settings: LlmSettings, *, memory: Memory | None = None, sleep: Sleep = asyncio.sleep
) -> LlmReviewer:
    """The reviewer for ``REVIEWER=llm``: its provider from the settings, its memory the one
    given (the database's, when serving) or in memory (the command line)."""
    from .memory import InMemory
    from .providers import make_provider

    kept = memory if memory is not None else InMemory()
    return LlmReviewer(make_provider(settings, sleep=sleep), limits=limits_from(settings), memory=kept)


def configured_reviewer(settings: ReviewerSettings, *, memory: Memory | None = None) -> Reviewer:
    """The engine ``REVIEWER`` names, chosen the same way for the bot and the command line."""
    if settings.reviewer == "llm":
        return build_reviewer(settings, memory=memory)
    from ..engine.builtin import BuiltinReviewer

    return BuiltinReviewer()
