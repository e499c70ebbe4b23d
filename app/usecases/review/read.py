"""Everything a review needs from GitHub (or a local clone), read once into frozen values.

``Head`` is what decides whether the job reviews at all (the pull request, the bot's reviews, the
repository's settings from its default branch); ``PullState`` is the rest, read only when it
does: the changed files and their patches (parsed here, once), the repository's learnings, and
after the bot's first review its open threads, the PR's review comments, the overrules recorded
and those 👎 reactions carry (applied by ``plan``, recorded by ``publish``), the lines changed
since its last review, where its findings' files went, and what its blocking review asked for.

A ``Reader`` is where that comes from: ``GitHubReader`` (the bot, and ``review OWNER/REPO#N``
with a token) or ``LocalReader`` (``review --git`` and ``eval``: a clone, no network).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ...github import calls as github
from ...github import pullstate
from ...github.client import GitHubClient
from ...guards import BotIdentity, is_bot_login
from ...review.core.diff import PatchLines, parse_patch
from ...review.core.model import PullContext
from ...review.measure.local import GitError, context_from_git, git
from ...review.rounds import decide
from ...review.rounds.identity import Delta, Scope, delta_of
from ...review.rounds.learnings import Learning
from ...review.rounds.markers import Trigger
from ...review.rounds.overrule import Overrule
from ...settings.repoconfig import RepoConfig, parse_repo_config
from ..learnings import Learnings
from ..overrules import PendingOverrule, read_reactions, recorded_overrules, reported_at
from ..pause import paused_by
from ..pull import LoadedConfig, RepoConfigs, build_context, review_settings, settings_path
from ..threads import OpenThread, bot_threads, thread_renames

Review = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Request:
    """One job's ask: review this pull request, for this trigger."""

    repo: str
    pr_number: int
    trigger: Trigger


@dataclass(frozen=True, slots=True)
class Head:
    """The pull request as the first decisions need it: its REST shape, the bot's reviews
    (oldest first) and the repository's settings."""

    repo: str
    pull: Mapping[str, Any]
    mine: tuple[Review, ...]
    loaded: LoadedConfig
    conversation: tuple[Mapping[str, Any], ...] = ()  # the pull request's comments (pause)
    runs: tuple[Mapping[str, Any], ...] = ()  # the latest check runs on the head, every App's
    threads: tuple[github.ReviewThread, ...] = ()  # every review thread, anyone's

    @property
    def pr_number(self) -> int:
        return int(self.pull["number"])

    @property
    def head_sha(self) -> str:
        return str(self.pull["head"]["sha"])

    @property
    def config(self) -> RepoConfig:
        return self.loaded.config

    @property
    def block(self) -> Review | None:
        """The bot's review that blocks the pull request now (its latest decision requested changes)."""
        return decide.blocking_review(self.mine)


@dataclass(frozen=True, slots=True)
class PullState:
    """Everything else the review decides from, read once (see the module's docstring)."""

    head: Head
    context: PullContext
    patches: Mapping[str, PatchLines]  # every changed file's patch, parsed (empty when GitHub omits it)
    learned: tuple[Learning, ...] = ()
    open_threads: tuple[OpenThread, ...] = ()  # the bot's unresolved threads that carry a finding
    comments: tuple[Mapping[str, Any], ...] = ()  # the PR's review comments
    overruled: tuple[Overrule, ...] = ()  # recorded, and carried by the pending ones
    pending: tuple[PendingOverrule, ...] = ()  # 👎 overrules this review records
    renames: Mapping[str, str] = field(default_factory=dict)  # where recorded findings' files went
    delta: Delta = field(default_factory=lambda: Delta(Scope.FULL))  # changed since the last review
    block_comments: tuple[Mapping[str, Any], ...] = ()  # the blocking review's inline comments

    @property
    def threads(self) -> tuple[OpenThread, ...]:
        """The open threads that still hold their findings (those overruled now are withdrawn)."""
        return held(self.open_threads, self.overruled)


def held(threads: Sequence[OpenThread], overruled: Sequence[Overrule]) -> tuple[OpenThread, ...]:
    withdrawn = {o.thread for o in overruled}
    return tuple(t for t in threads if t.thread.root_comment_id not in withdrawn)


def parsed(context: PullContext) -> dict[str, PatchLines]:
    return {f.path: parse_patch(f.patch) for f in context.files}


class Reader(Protocol):
    """Where a review's state comes from; every read of the pipeline goes through one."""

    async def head(self, request: Request) -> Head: ...

    async def paused_by(self, head: Head) -> str | None:
        """Who paused the pull request (``usecases.pause``), None when nobody did."""
        ...

    async def state(self, head: Head) -> PullState: ...

    async def default_branch_text(self, head: Head, path: str) -> str | None:
        """A file of the repository's default branch (never the PR's head), None when absent."""
        ...


@dataclass(frozen=True, slots=True)
class GitHubReader:
    gh: GitHubClient
    identity: BotIdentity
    repo_configs: RepoConfigs
    learnings: Learnings

    async def head(self, request: Request) -> Head:
        """The pull request, its reviews and conversation, the head's check runs and the
        settings: one GraphQL request (``github.pullstate``)."""
        repo, path = request.repo, settings_path(self.identity.slug)
        state = await pullstate.read_pull_state(
            self.gh, repo=repo, pr_number=request.pr_number, settings_path=path
        )
        if state.pull.get("state") != "open":  # it gets no review
            return Head(repo, state.pull, (), LoadedConfig(RepoConfig(), None, None))
        settings = state.settings
        loaded = self.repo_configs.loaded(repo, path=path, source=settings.source, text=settings.text)
        mine = tuple(decide.bot_reviews(state.reviews, self.identity))
        return Head(
            repo, state.pull, mine, loaded, state.comments, state.runs or (), state.review_state.threads
        )

    async def paused_by(self, head: Head) -> str | None:
        return paused_by(head.conversation, self.identity)

    async def default_branch_text(self, head: Head, path: str) -> str | None:
        return await github.get_file_text(self.gh, repo=head.repo, path=path)

    async def state(self, head: Head) -> PullState:
        gh, repo, number = self.gh, head.repo, head.pr_number
        context = await build_context(
            gh, repo=repo, pull=head.pull, config=head.config, slug=self.identity.slug
        )
        first = PullState(head, context, parsed(context), tuple(await self.learnings.of_repo(repo)))
        if not head.mine:  # threads, overrules, a delta are the bot's: none before its first review
            return first
        comments = tuple(await github.list_pull_review_comments(gh, repo=repo, pr_number=number))
        threads = tuple(bot_threads(head.threads, self.identity))
        pending = await read_reactions(
            gh,
            self.identity,
            repo=repo,
            pr_author=context.author_login,
            comments=comments,
            threads=threads,
            learn=head.config.review.learn,
        )
        overruled = recorded_overrules(comments, self.identity) + [o for p in pending for o in p.overrules]
        delta = await self.delta(head, since=decide.last_reviewed_head(head.mine))
        renames = await thread_renames(
            gh,
            repo=repo,
            head_sha=head.head_sha,
            files=context.files,
            recorded=[(m.path, m.head_sha) for t in held(threads, overruled) for m in t.markers]
            + reported_at(comments, self.identity, overruled),
            known=delta.renames,
        )
        return PullState(
            head,
            context,
            first.patches,
            learned=first.learned,
            open_threads=threads,
            comments=comments,
            overruled=tuple(overruled),
            pending=tuple(pending),
            renames=renames,
            delta=delta,
            block_comments=await self.block_comments(head, author=context.author_login),
        )

    async def delta(self, head: Head, *, since: str | None) -> Delta:
        """The lines changed since ``since`` (the bot's last reviewed head), from GitHub's
        comparison of the two; all of it after history was rewritten."""
        if not since or since == head.head_sha or not github.is_commit_sha(since):
            return Delta(Scope.FULL)
        comparison = await github.compare_commits(self.gh, repo=head.repo, base=since, head=head.head_sha)
        return delta_of(since, head.head_sha, comparison)

    async def block_comments(self, head: Head, *, author: str | None) -> tuple[Mapping[str, Any], ...]:
        """The blocking review's comments (what it asked for), when this review must re-decide it
        (never on the bot's own pull request: its review there is a comment)."""
        block = head.block
        if block is None or is_bot_login(author, self.identity):
            return ()
        comments = await github.list_review_comments(
            self.gh, repo=head.repo, pr_number=head.pr_number, review_id=int(block["id"])
        )
        return tuple(comments)


@dataclass(frozen=True, slots=True)
class LocalReader:
    """A local git range as the pull request (``review --git BASE..HEAD``, ``eval``): its settings
    from BASE (the branch it would merge into), no earlier reviews, nothing paused."""

    path: Path
    base: str
    tip: str
    identity: BotIdentity
    learnings: Learnings
    title: str | None = None
    repo: str | None = None  # the repository whose learnings apply; None: none do

    async def head(self, request: Request) -> Head:
        shas = [
            (await git(self.path, "rev-parse", "--verify", f"{ref}^{{commit}}")).decode().strip()
            for ref in (self.base, self.tip)
        ]
        path = settings_path(self.identity.slug)
        text = await self.default_branch_text(None, path)
        config, problem = parse_repo_config(text)
        source = f"{self.base}:{path}" if text is not None else None
        pull = {
            "number": request.pr_number,
            "state": "open",
            "head": {"sha": shas[1]},
            "base": {"sha": shas[0]},
        }
        return Head(request.repo, pull, (), LoadedConfig(config, source, problem))

    async def paused_by(self, head: Head) -> str | None:
        return None

    async def default_branch_text(self, head: Head | None, path: str) -> str | None:
        try:
            return (await git(self.path, "show", f"{self.base}:{path}")).decode(errors="replace")
        except GitError:  # no such file at BASE
            return None

    async def state(self, head: Head) -> PullState:
        settings = review_settings(head.config, self.identity.slug)
        context = await context_from_git(self.path, self.base, self.tip, settings=settings)
        if self.title is not None:
            context = replace(context, title=self.title)
        learned = tuple(await self.learnings.of_repo(self.repo)) if self.repo else ()
        return PullState(head, context, parsed(context), learned)
