"""How much the model may be asked, and in which requests: the limits, the daily budgets (per
installation, pull request and person, counted in ``memory``), and the packing of file sections
into requests under ``LLM_MAX_INPUT_TOKENS``, planned in order against what the review may use."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from ..core.model import ChangedFile, Skipped
from .client import Tally
from .memory import Charge, Memory, SpendScope
from .providers import ProviderError


@dataclass(frozen=True, slots=True)
class Limits:
    max_input_tokens: int = 24_000
    max_output_tokens: int = 4_096
    concurrency: int = 4
    max_tokens_per_review: int = 200_000
    daily_token_budget: int = 0  # per installation; 0: no cap
    pull_daily_token_budget: int = 0  # per pull request
    person_daily_token_budget: int = 0  # per person (and installation)
    price_input_per_mtok: float = 0.0
    price_output_per_mtok: float = 0.0


@dataclass(slots=True)
class Section:
    file: ChangedFile
    text: str
    tokens: int
    key: str  # cache key
    shown: frozenset[tuple[str, int]] = frozenset()  # (path, head line) the section shows


@dataclass(slots=True)
class Group:
    sections: list[Section]
    tokens: int = 0

    @property
    def paths(self) -> list[str]:
        return [s.file.path for s in self.sections]


# ------------------------------------------------------------------------------- budgets
BUDGET_OF = {SpendScope.PULL: "this pull request's", SpendScope.PERSON: "this person's"}
SETTING_OF = {
    SpendScope.PULL: "LLM_PULL_DAILY_TOKEN_BUDGET",
    SpendScope.PERSON: "LLM_PERSON_DAILY_TOKEN_BUDGET",
}


def charges_for(
    installation_id: int | None, repo: str, pr_number: int | None, person: str | None
) -> list[Charge]:
    """What a model call is counted against beside the installation: the pull request, and the
    person whose activity caused it (the author for a review, whoever asked for a judgement)."""
    charges: list[Charge] = []
    if pr_number is not None:
        charges.append((SpendScope.PULL, f"{repo}#{pr_number}"))
    if person:
        charges.append((SpendScope.PERSON, f"{installation_id or 0}:{person.casefold()}"))
    return charges


class Budget:
    """The daily budgets, read and counted in ``memory`` (the database, when there is one)."""

    def __init__(self, limits: Limits, memory: Memory, clock: Callable[[], float] = time.time) -> None:
        self.limits = limits
        self.memory = memory
        self.clock = clock

    async def _budgets(
        self, installation_id: int | None, charges: Sequence[Charge]
    ) -> list[tuple[int, int, str, str]]:
        """Each daily budget that applies: used today, the budget, whose it is, its setting."""
        now = self.clock()
        budgets: list[tuple[int, int, str, str]] = []
        if self.limits.daily_token_budget:
            used = await self.memory.used_today(installation_id, now)
            budgets.append(
                (used, self.limits.daily_token_budget, "this installation's", "LLM_DAILY_TOKEN_BUDGET")
            )
        per = {
            SpendScope.PULL: self.limits.pull_daily_token_budget,
            SpendScope.PERSON: self.limits.person_daily_token_budget,
        }
        for scope, subject in charges:
            if per[scope]:
                used = await self.memory.used_by(scope, subject, now)
                budgets.append((used, per[scope], BUDGET_OF[scope], SETTING_OF[scope]))
        return budgets

    async def over(self, installation_id: int | None, charges: Sequence[Charge]) -> str | None:
        """Why no model call may start now (a budget is used up), or None."""
        for used, budget, whose, setting in await self._budgets(installation_id, charges):
            if used >= budget:
                return f"{whose} daily token budget is used up ({used:,} of {budget:,}, {setting})"
        return None

    async def allowance(self, installation_id: int | None, charges: Sequence[Charge]) -> tuple[int, str]:
        """Tokens a review may use, and the setting that limits it."""
        cap, why = (
            self.limits.max_tokens_per_review,
            "the review's token cap was reached (LLM_MAX_TOKENS_PER_REVIEW)",
        )
        for used, budget, whose, setting in await self._budgets(installation_id, charges):
            if budget - used < cap:
                cap, why = max(0, budget - used), f"{whose} daily token budget was reached ({setting})"
        return cap, why

    async def spend(self, installation_id: int | None, tally: Tally, charges: Sequence[Charge]) -> None:
        if tally.requests:
            await self.memory.spend(
                installation_id,
                self.clock(),
                input_tokens=tally.input_tokens,
                output_tokens=tally.output_tokens,
                requests=tally.requests,
                charges=charges,
            )

    async def today(self, installation_id: int | None) -> str:
        """The installation's usage today, for the review's footer ("" without a daily budget)."""
        budget = self.limits.daily_token_budget
        if not budget:
            return ""
        used = await self.memory.used_today(installation_id, self.clock())
        return f"today for this installation: {used:,} of {budget:,} tokens (LLM_DAILY_TOKEN_BUDGET)"


# ------------------------------------------------------------------------------- packing
async def pack(
    sections: Sequence[Section],
    *,
    limit: int,
    overhead: int,
    measure: Callable[[Sequence[Section]], Awaitable[int]],
) -> list[Group]:
    """Greedy packing in the PR's order on estimates; each request then measured (with the
    provider's tokenizer where it has one) and halved while over the limit."""
    if not sections:
        return []
    groups: list[Group] = []
    current: list[Section] = []
    size = overhead
    for section in sections:
        if current and size + section.tokens > limit:
            groups.append(Group(current))
            current, size = [], overhead
        current.append(section)
        size += section.tokens
    groups.append(Group(current))
    measured: list[Group] = []
    while groups:
        group = groups.pop(0)
        try:
            group.tokens = await measure(group.sections)
        except ProviderError:
            group.tokens = overhead + sum(s.tokens for s in group.sections)
        if group.tokens > limit and len(group.sections) > 1:
            half = len(group.sections) // 2
            groups[:0] = [Group(group.sections[:half]), Group(group.sections[half:])]
            continue
        measured.append(group)
    return measured


def plan(
    groups: Sequence[Group], limits: Limits, allowance: tuple[int, str]
) -> tuple[list[Group], list[Skipped]]:
    """The requests that fit, in order: a request is sent only if its input plus its output
    allowance fits in what is left of the review's cap; the files of the rest, and why."""
    planned: list[Group] = []
    left_out: list[Skipped] = []
    left, why = allowance
    for group in groups:
        if len(group.sections) == 1 and group.tokens > limits.max_input_tokens:
            left_out.append(Skipped(group.paths[0], "too large for one model request (LLM_MAX_INPUT_TOKENS)"))
            continue
        cost = group.tokens + limits.max_output_tokens
        if cost > left:
            left_out += [Skipped(path, why) for path in group.paths]
            left = 0  # stop here: later requests must not jump the queue
            continue
        left -= cost
        planned.append(group)
    return planned, left_out
