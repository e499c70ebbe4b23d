"""What a demo story works with: the stage (the fake GitHub and the bot), the timeline it prints
and the narrator, and the reading of the fake's records that the stories show."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from ..guards import BotIdentity
from ..sandbox import Call, FakeGitHub
from ..sandbox.state import CheckRun, Pull
from ..usecases.checks import CheckKind, check_name
from .harness import SLUG
from .runner import BOT, DECOY, REPO, Stage
from .timeline import Narrator, StepTally, Timeline, short

READINESS_CHECK = check_name(CheckKind.READINESS, BotIdentity.from_slug(SLUG))


@dataclass
class DemoOptions:
    scenario: str = "story"
    approve: bool = True
    html: Path | None = None
    workdir: Path | None = None
    color: bool | None = None  # None: colours only when stdout is a terminal


class Show:
    """What a story needs: the stage (fake + bot), the timeline, and the narrator."""

    def __init__(self, stage: Stage, timeline: Timeline, narrator: Narrator, options: DemoOptions) -> None:
        self.stage = stage
        self.fake: FakeGitHub = stage.fake
        self.timeline = timeline
        self.narrator = narrator
        self.options = options
        self.number = 0  # the pull request the story is about (for the HTML page)
        self.pushes: list[tuple[int, str]] = []

    def human(self, who: str, text: str) -> None:
        self.narrator.poll()
        self.timeline.say(who, text, kind="human")

    def github(self, text: str, *, style: str | None = None) -> None:
        self.narrator.poll()
        self.timeline.say("GitHub", text, kind="github", style=style)

    def demo(self, text: str, *, style: str | None = None, at: float | None = None) -> None:
        if not self.narrator.paused:
            self.narrator.poll()
        self.timeline.say("demo", text, kind="demo", style=style, at=at)

    async def settle(self, within: float = 15.0) -> StepTally:
        """Wait until the bot is idle again; the step's tally of reads, writes and echoes."""
        await self.stage.drain(within)
        return self.narrator.end_step()

    async def request_review(self, number: int, *, by: str, again: bool = False) -> None:
        requested = [*self.pull(number).requested_reviewers, DECOY]
        word = " again" if again else ""
        self.human(by, f"requested a review from {DECOY}{word} (requested reviewers: {', '.join(requested)})")
        await self.fake.request_review(REPO, number, DECOY, by=by)

    # ---------------------------------------------------------------- reading the fake
    def pull(self, number: int) -> Pull:
        world = self.fake.world
        return world.pull(world.repo(REPO), number)

    def pr_state(self, number: int) -> str:
        pull = self.pull(number)
        decision = self.fake.review_decision(REPO, number) or "none"
        requested = ", ".join(pull.requested_reviewers) or "nobody"
        threads = self.fake.threads(REPO, number)
        resolved = sum(t["is_resolved"] for t in threads)
        runs = [r for r in self.fake.world.check_runs.values() if r.head_sha == pull.head_sha]
        checks = ", ".join(f'"{r.name}" {r.conclusion or r.status}' for r in runs) or "none"
        return (
            f"PR #{number} at {short(pull.head_sha)}: review decision {decision}; "
            f"requested reviewers: {requested}; threads resolved {resolved}/{len(threads)}; checks: {checks}"
        )

    def bot_thread(self, number: int, path: str, rule: str) -> tuple[int, str]:
        """The bot's comment that opened the thread about ``rule`` in ``path``, and its place."""
        world = self.fake.world
        for thread in world.threads_of(self.pull(number)):
            root = world.review_comments[thread.comment_ids[0]]
            if root.user == BOT and root.path == path and rule in root.body:
                return root.id, f"{root.path}:{root.original_line}"
        raise LookupError(f"the bot has no thread about {rule} in {path}")

    def push(self, files: dict[str, str | None], message: str) -> None:
        """The author pushes to the PR's branch (remembered for the HTML page's timeline)."""
        world = self.fake.world
        newest = max([0, *world.reviews, *world.review_comments, *world.issue_comments])
        sha = self.fake.push(REPO, "feature", files, message=message)
        self.pushes.append((newest, sha))

    def reviews_posted(self) -> list[Call]:
        return [
            c
            for c in self.fake.calls
            if c.method == "POST" and c.path.endswith("/reviews") and 200 <= c.status < 300
        ]

    # ---------------------------------------------------------------- readiness, as it is shown
    async def readiness(self, number: int, prefix: str, *, within: float = 15.0) -> None:
        """Wait for the bot's readiness check run to say ``prefix`` (its looks are timers in the
        queue, so the bot is idle in between), then show it, and whether the comment said it too
        (only when someone must act: ``readiness.comment``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            await self.stage.drain(within)
            headline = self.readiness_title(number)
            if headline is not None and headline.startswith(prefix):
                if self.readiness_headline(number) == headline:
                    self.github(f"readiness check run and comment: {headline}")
                else:
                    self.github(f"readiness check run (no comment: nobody needs to act): {headline}")
                return
            if loop.time() > deadline:
                raise TimeoutError(f"the readiness check run never said {prefix!r} (it says {headline!r})")
            await asyncio.sleep(0.05)

    def readiness_run(self, number: int) -> CheckRun | None:
        """The bot's latest readiness check run on the PR's head."""
        head = self.pull(number).head_sha
        runs = [
            r for r in self.fake.world.check_runs.values() if r.name == READINESS_CHECK and r.head_sha == head
        ]
        return runs[-1] if runs else None

    def readiness_title(self, number: int) -> str | None:
        run = self.readiness_run(number)
        return run.title if run else None

    def readiness_headline(self, number: int) -> str | None:
        world = self.fake.world
        for comment in world.issue_comments_of(world.repo(REPO), number):
            if comment.user == BOT and "<!-- revbot:readiness " in comment.body:
                return comment.body.split("\n", 1)[0]
        return None

    def reactions(self, number: int) -> int:
        return sum(1 for r in self.fake.world.reactions if r.subject == ("issue", number))

    def check_runs(self, number: int) -> int:
        head = self.pull(number).head_sha
        return sum(1 for r in self.fake.world.check_runs.values() if r.head_sha == head)
