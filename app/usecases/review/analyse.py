"""The analysis: the state's context, prepared for the configured reviewer, reviewed through
the bounded process (``usecases.pull.analyse``, cached by content), and the findings overruled
on this pull request or left out by the repository's learnings withdrawn before any verdict.
"""

from __future__ import annotations

from functools import partial

from ...guards import BotIdentity
from ...review.core.model import ModelInputs, ModelOptions, PriorFinding, Reviewer, ReviewResult
from ...review.rounds.learnings import prompt_context
from ...review.rounds.overrule import withdraw
from ...settings.repoconfig import MAX_INSTRUCTIONS_CHARS
from ..pull import AnalysisCache
from ..pull import analyse as analyse_cached
from ..threads import finding_text, thread_replies
from .read import PullState, Reader


async def analyse(
    state: PullState, *, reader: Reader, reviewer: Reviewer, analyses: AnalysisCache, identity: BotIdentity
) -> ReviewResult:
    """The findings at head, without those withdrawn (overruled, or matching a learning)."""
    context = await reviewer.prepare(
        state.context, partial(model_inputs, state, reader=reader, identity=identity)
    )
    result = await analyse_cached(context, reviewer=reviewer, analyses=analyses)
    return withdraw(
        result,
        overruled=state.overruled,
        learned=[item.key for item in state.learned],
        line_text={path: lines.added_text for path, lines in state.patches.items()},
        changed=len(context.files),
        renames=state.renames,
    )


async def model_inputs(state: PullState, *, reader: Reader, identity: BotIdentity) -> ModelInputs:
    """What only a model reviewer reads (``Reviewer.prepare`` asks for it): the repository's
    options and review instructions (the config's ``review.instructions`` and
    ``.github/{slug}-instructions.md``, both from the default branch, never from the PR's head,
    and capped), the bot's open findings with the replies in their threads, and the
    repository's learnings."""
    config = state.head.config
    inline = (config.review.instructions or "")[:MAX_INSTRUCTIONS_CHARS]
    from_file = await reader.default_branch_text(state.head, f".github/{identity.slug}-instructions.md")
    instructions = "\n\n".join(
        part.strip() for part in (inline, (from_file or "")[:MAX_INSTRUCTIONS_CHARS]) if part
    )
    llm = config.review.llm
    prior = []
    for item in state.open_threads:
        replies = tuple(
            thread_replies(
                state.comments, item, identity, pr_author=state.context.author_login, config=config
            )
        )
        prior.append(
            PriorFinding(
                rule=item.finding.rule,
                path=item.finding.path,
                line=item.thread.line or item.finding.line,
                message=finding_text(item.thread.root_body),
                replies=replies[-5:],
            )
        )
    return ModelInputs(
        model=ModelOptions(
            blockers=llm.blockers,
            max_findings=llm.max_findings,
            instructions=instructions,
            skip_drafts=llm.skip.drafts,
            skip_title_keywords=llm.skip.title_keywords,
            skip_labels=llm.skip.labels,
            skip_authors=llm.skip.authors,
            skip_paths=llm.skip.paths,
            learnings=prompt_context(state.learned),
        ),
        prior=tuple(prior),
    )
