"""Thread judgement: whether one of the bot's model findings is fixed at the pull request's head.

The answer rests on the code at head; the replies in the thread (only those of people who may
ask reach here) are untrusted context in a fence of their own. Cached by the thread, the head,
the code, the replies and the model; each call counted against the installation, the pull
request and whoever asked, and refused when one of their daily budgets is used up.
"""

from __future__ import annotations

import logging

from ..core.model import ThreadJudgement, ThreadQuestion, ThreadStatus
from . import prompt
from .client import ModelClient, Tally, cache_key
from .memory import Memory
from .packing import Budget, charges_for
from .providers import ProviderError
from .schema import THREAD_SCHEMA, ThreadAnswer, parse

log = logging.getLogger(__name__)

MAX_OUTPUT_TOKENS = 512
# The model's words (``THREAD_SCHEMA``) for the bot's: the prompt and the cached answers keep them.
ANSWERED = {
    "fixed": ThreadStatus.FIXED,
    "not_fixed": ThreadStatus.NOT_FIXED,
    "cannot_tell": ThreadStatus.CANNOT_TELL,
}


class ThreadJudge:
    def __init__(self, client: ModelClient, *, budget: Budget, memory: Memory) -> None:
        self.client = client
        self.budget = budget
        self.memory = memory

    async def judge(self, question: ThreadQuestion) -> ThreadJudgement | None:
        """Fixed / not fixed / cannot tell; None when there is no usable answer."""
        answer = await self._answer(question)
        return None if answer is None else ThreadJudgement(ANSWERED[answer.status], answer.reason)

    async def _answer(self, question: ThreadQuestion) -> ThreadAnswer | None:
        provider = self.client.provider
        key = cache_key(
            "thread",
            provider.name,
            provider.model,
            prompt.PROMPT_VERSION,
            question.repo,
            str(question.thread_id),
            question.head_sha,
            question.finding,
            question.code,
            *question.replies,
        )
        stored = await self.memory.answer(key)
        if stored is not None:
            cached, _ = parse(stored, ThreadAnswer)
            if cached is not None:
                return cached
        installation_id = question.installation_id
        charges = charges_for(installation_id, question.repo, question.pr_number, question.asked_by)
        over = await self.budget.over(installation_id, charges)
        if over is not None:
            log.info("thread verification by the model skipped: %s", over)
            return None
        request = prompt.thread_request(
            finding=question.finding, replies=question.replies, code=question.code, schema=THREAD_SCHEMA
        )
        tally = Tally()
        answer: ThreadAnswer | None = None
        try:
            reply = await self.client.ask(request, THREAD_SCHEMA, MAX_OUTPUT_TOKENS, tally)
            answer, problem = parse(reply.text, ThreadAnswer)
            if answer is None:
                repair = prompt.repair_request(request, reply.text, problem)
                reply = await self.client.ask(repair, THREAD_SCHEMA, MAX_OUTPUT_TOKENS, tally)
                answer, problem = parse(reply.text, ThreadAnswer)
        except ProviderError as exc:
            log.warning("thread verification by the model failed: %s", exc)
        finally:
            await self.budget.spend(installation_id, tally, charges)
        if answer is not None:
            await self.memory.remember(key, answer.model_dump_json())
        return answer
