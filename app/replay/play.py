"""Playing merged pull requests through the real bot against the fake GitHub.

One ``BotAndFake`` (the demo's harness: the bot's real ``Runtime``, worker and use cases, serving
its webhook endpoint on loopback, and the fake GitHub) serves the whole session; each pull
request gets a repository of its own in the fake (its settings and caches cannot leak into the
next one). The pull request is opened at its first push, a review is requested from the decoy,
and each later push is made at its own committer time on the session's clock, which is the
fake's and the bot's queue's: the bot's timers (readiness's quiet window) come due one by one
as the clock passes them, exactly as they did. Then the merge (at the merge commit's time).
A PR's timeline keeps its own gaps; if its first push is older than the clock (PRs overlap
in history) it is shifted later as a whole, since the clock never goes back.

Each tree is the clone's, with ``.github/<slug>.yml`` from the merge base the PR was merged
against and ``review.on_push: true`` added, in every commit (so the PR's diff never shows it).
Nothing leaves loopback: the fake's contents are the clone's blobs.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

import yaml

from ..demo.harness import APP_ID, INSTALLATION, SLUG, BotAndFake
from ..github import calls as github
from ..github.client import GitHubClient
from ..review.core.model import ReviewResult
from ..sandbox import FakeGitHub
from ..settings.repoconfig import RepoConfig, parse_repo_config
from ..usecases.pull import analyse, build_context
from .history import GitTrees, MergedPull, Push, changes

__all__ = ["DECOY", "Played", "ReplayClock", "Replayer", "replay_config"]

DECOY = SLUG  # DECOY_LOGIN defaults to the App's slug
CONFIG_PATH = f".github/{SLUG}.yml"
OWNER = "replay"
BRANCH = "pull"
BASE_BRANCH = "main"
GAP = 3600.0  # between one PR's merge and the next one's first push, when they overlapped
DRAIN_SECONDS = 900.0  # a bound against a hang, far above a review of a large PR on a loaded machine
MAX_TIMER_STEPS = 200  # per stretch of time: a timer that re-arms itself forever cannot hang the replay
# The settings of the configured reviewer pass through; the bot's identity, keys, database and
# GitHub address are the harness's (the fake on loopback).
PASSED_SETTINGS = re.compile(r"^(REVIEWER|REVIEW_.*|LLM_.*|READINESS_.*)$")


class ReplayClock:
    """Epoch seconds that move only forward, when the replay says so."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def move_to(self, moment: float) -> None:
        self.now = max(self.now, moment)


def replay_config(text: str | None) -> str:
    """The repository's own settings with ``review.on_push`` on: the replay follows every push.
    A file that is not a YAML mapping stays as it is (the bot reports it, as it would)."""
    try:
        data = yaml.safe_load(text) if text else {}
    except yaml.YAMLError:
        return text or ""
    data = data or {}
    if not isinstance(data, dict) or not isinstance(data.setdefault("review", {}), dict):
        return text or ""
    data["review"]["on_push"] = True
    return yaml.safe_dump(data, sort_keys=False)


def login_of(name: str) -> str:
    """A GitHub-shaped login for a commit's author name (never the decoy's)."""
    login = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")[:39] or "author"
    return f"{login}-author" if login.casefold() == DECOY.casefold() else login


class ErrorRecords(logging.Handler):
    """Every ERROR the process logs (a job that failed, a handler or worker that raised)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.name}: {record.getMessage()}"[:500])


@dataclass
class Played:
    """One pull request after its replay: where it lives in the fake, and what it took."""

    pull: MergedPull
    repo: str
    number: int
    config: RepoConfig
    bases: dict[str, str]  # head sha -> the fake's base commit of its diff
    calls: slice  # the fake's calls during this PR
    pushes: list[tuple[int, str]] = field(default_factory=list)  # (newest world id then, sha): the HTML page
    errors: list[str] = field(default_factory=list)
    failed_jobs: int = 0
    final: ReviewResult | None = None  # the re-check at the merged head (None: it could not run)
    seconds: float = 0.0


class Replayer:
    """The session: the bot and the fake, started once, and the clone's trees."""

    def __init__(self, clone: Path, workdir: Path, *, start: float, environ: Mapping[str, str]) -> None:
        self.trees = GitTrees(clone)
        self.name = re.sub(r"[^A-Za-z0-9_.-]+", "-", clone.resolve().name) or "repo"
        self.clock = ReplayClock(start)
        secret = secrets.token_hex(16)
        self.fake = FakeGitHub(app_id=APP_ID, app_slug=SLUG, webhook_secret=secret, clock=self.clock)
        env = {key: value for key, value in environ.items() if PASSED_SETTINGS.match(key)}
        self.stage = BotAndFake(workdir, self.fake, secret=secret, env=env, clock=self.clock)
        self.fake.add_user(DECOY)
        self.errors = ErrorRecords()

    async def __aenter__(self) -> Self:
        logging.getLogger().addHandler(self.errors)
        await self.stage.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self.stage.stop()
        finally:
            logging.getLogger().removeHandler(self.errors)

    async def advance_to(self, moment: float) -> None:
        """Let time pass until ``moment``, stopping at each timer of the bot's that comes due on
        the way so it runs when it was meant to (the bot is idle: every step ends in a drain)."""
        for _ in range(MAX_TIMER_STEPS):
            due = [at for at in await self.stage.timers() if at <= moment]
            if not due:
                break
            self.clock.move_to(due[0])
            await self.stage.drain(DRAIN_SECONDS)
        self.clock.move_to(moment)

    async def failed_jobs(self) -> int:
        return int((await self.stage.store.jobs_by_status()).get("failed", 0))

    async def play(self, pull: MergedPull) -> Played:
        started, errors_before = time.monotonic(), len(self.errors.messages)
        failed_before, calls_from = await self.failed_jobs(), len(self.fake.calls)
        repo = f"{OWNER}/{self.name}-{pull.merge_sha[:12]}"
        self.fake.add_repo(repo, installation_id=INSTALLATION, default_branch=BASE_BRANCH)
        first = pull.pushes[0]
        shift = max(0.0, self.clock.now + GAP - first.at) if self.clock.now > first.at else 0.0
        config_text = replay_config((await self.trees.tree(pull.merge_base)).get(CONFIG_PATH))
        author = login_of(pull.author)
        self.clock.move_to(first.at + shift)
        branch = _Branch(self.fake, repo, config_text, author)
        await branch.start(self, first)
        opened = self.fake.open_pull(
            repo, head=BRANCH, base=BASE_BRANCH, title=pull.title, body=pull.body, author=author, notify=True
        )
        number = int(opened["number"])
        await self.stage.drain(DRAIN_SECONDS)
        await self.fake.request_review(repo, number, DECOY, by=author)
        await self.stage.drain(DRAIN_SECONDS)
        for push in pull.pushes[1:]:
            await self.advance_to(push.at + shift)
            await branch.push(self, push)
            await self.stage.drain(DRAIN_SECONDS)
        await self.advance_to(pull.merged_at + shift)
        await self.stage.drain(DRAIN_SECONDS)
        await self.fake.close_pull(repo, number, by=author, merged=True)
        await self.stage.drain(DRAIN_SECONDS)
        config = parse_repo_config(config_text)[0]
        played = Played(pull, repo, number, config, branch.bases, slice(calls_from, len(self.fake.calls)))
        played.pushes = branch.pushes
        try:
            played.final = await self.analyse_head(played)
        except Exception as exc:  # noqa: BLE001 - the bot's engine failing at the merged head: this PR's crash
            self.errors.messages.append(f"the re-check at the merged head failed: {exc!r}"[:500])
        played.errors = self.errors.messages[errors_before:]
        played.failed_jobs = await self.failed_jobs() - failed_before
        played.seconds = time.monotonic() - started
        return played

    async def analyse_head(self, played: Played) -> ReviewResult | None:
        """The bot's own re-check at the merged head (the engine thread verification uses), read
        through the fake as the bot reads a pull request: which flagged findings are gone."""
        runtime = self.stage.runtime
        assert runtime is not None and runtime.session is not None and runtime.tokens is not None
        token = await runtime.tokens.get(INSTALLATION)
        gh = GitHubClient(
            runtime.session, api_url=self.fake.api_url, graphql_url=self.fake.graphql_url, oauth_token=token
        )
        pull = await github.get_pull(gh, repo=played.repo, pr_number=played.number)
        context = await build_context(gh, repo=played.repo, pull=pull, config=played.config)
        return await analyse(context, reviewer=runtime.reviewer.mechanical(), analyses=runtime.analyses)


class _Branch:
    """The PR's branch and its base branch in the fake, commit by commit from the clone's trees."""

    def __init__(self, fake: FakeGitHub, repo: str, config: str, author: str) -> None:
        self.fake, self.repo, self.config, self.author = fake, repo, config, author
        self.base, self.head = "", ""  # none yet: the first base is a root commit
        self.base_tree: dict[str, str] = {}
        self.head_tree: dict[str, str] = {}
        self.bases: dict[str, str] = {}  # head -> base of its diff
        self.pushes: list[tuple[int, str]] = []  # (the newest world id before it, sha)

    async def _tree(self, replayer: Replayer, sha: str) -> dict[str, str]:
        return {**await replayer.trees.tree(sha), CONFIG_PATH: self.config}

    def _commit(
        self, sha: str, parent_tree: dict[str, str], tree: dict[str, str], parent: str, message: str
    ) -> None:
        self.fake.add_commit(
            self.repo,
            changes(parent_tree, tree),
            parent=parent or None,
            sha=sha,
            message=message,
            author=self.author,
        )

    async def _move_base(self, replayer: Replayer, sha: str) -> None:
        """The base branch is at ``sha`` now (the PR's first base, or a newer one it took in)."""
        tree = await self._tree(replayer, sha)
        if sha not in self.fake.world.repo(self.repo).commits:
            self._commit(sha, self.base_tree, tree, self.base, "base")
        self.fake.set_branch(self.repo, BASE_BRANCH, sha)
        self.base, self.base_tree = sha, tree
        self.head, self.head_tree = sha, tree  # the next push sits on it

    async def start(self, replayer: Replayer, first: Push) -> None:
        await self._move_base(replayer, first.base)
        tree = await self._tree(replayer, first.sha)
        self._commit(first.sha, self.head_tree, tree, self.head, first.subject)
        self.fake.set_branch(self.repo, BRANCH, first.sha)
        self.head, self.head_tree, self.bases[first.sha] = first.sha, tree, first.base

    async def push(self, replayer: Replayer, push: Push) -> None:
        if push.base != self.base:  # the base branch merged in, or a rebase: the fake sees a force-push
            await self._move_base(replayer, push.base)
        world = self.fake.world
        self.pushes.append(
            (max([0, *world.reviews, *world.review_comments, *world.issue_comments]), push.sha)
        )
        tree = await self._tree(replayer, push.sha)
        self._commit(push.sha, self.head_tree, tree, self.head, push.subject)
        self.fake.push_commit(self.repo, BRANCH, push.sha)
        self.head, self.head_tree, self.bases[push.sha] = push.sha, tree, push.base
