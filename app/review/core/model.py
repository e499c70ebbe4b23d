"""The engine's vocabulary: plain dataclasses, no I/O."""

from __future__ import annotations

import abc
import enum
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol


class Severity(enum.IntEnum):
    """Ordered: a higher value is more severe (used to pick which findings get inline comments)."""

    NIT = 1
    CONCERN = 2
    BLOCKER = 3

    @property
    def label(self) -> str:
        return self.name.lower()


MODEL_RULES = "llm/"  # the prefix of every rule of the language-model reviewer's own findings


class Verdict(enum.StrEnum):
    """The review's decision; the policy (approval disabled, the bot's own PR) maps it to the
    GitHub review event posted, a verdict too (``output.render.review_event``)."""

    REQUEST_CHANGES = "REQUEST_CHANGES"
    COMMENT = "COMMENT"
    APPROVE = "APPROVE"


@dataclass(frozen=True, slots=True)
class ChangedFile:
    """One entry of ``GET /pulls/{n}/files`` (or of a local ``git diff``)."""

    path: str
    status: str  # added | modified | removed | renamed | copied | changed | unchanged
    patch: str | None  # unified diff hunks; None when GitHub omitted it (binary or too large)
    additions: int = 0
    deletions: int = 0
    previous_path: str | None = None
    blob_sha: str | None = None  # the file's blob at head; None when unknown


@dataclass(frozen=True, slots=True)
class FileContent:
    """A file at the head commit. ``text`` is None for binary files."""

    text: str | None
    size: int
    is_binary: bool = False


ContentReader = Callable[[Sequence[str]], Awaitable[Mapping[str, FileContent | None]]]
"""Reads several paths at the head commit in one go; a missing path maps to None."""


@dataclass(frozen=True, slots=True)
class RepoTree:
    """Every path of the repository at the head commit (one recursive tree read): what a checkout
    would hold, without the contents. Tells the analyzers the package layout (directories,
    ``__init__.py`` files), which config files exist, and which paths are symlinks."""

    files: frozenset[str] = frozenset()  # regular files (blobs), symlinks excluded
    symlinks: frozenset[str] = frozenset()
    directories: frozenset[str] = frozenset()
    truncated: bool = False  # GitHub cut the listing short (over 100,000 entries)

    @classmethod
    def of(cls, files: Iterable[str], symlinks: Iterable[str] = (), *, truncated: bool = False) -> RepoTree:
        """The tree of these paths, their directories derived."""
        regular, links = frozenset(files), frozenset(symlinks)
        directories = {
            path.rsplit("/", depth)[0] for path in regular | links for depth in range(1, path.count("/") + 1)
        }
        return cls(regular, links, frozenset(directories), truncated)


TreeReader = Callable[[], Awaitable[RepoTree | None]]
"""Lists the repository at the head commit; None when the listing is not available."""


@dataclass(frozen=True, slots=True)
class ReviewSettings:
    """What the repository's config (or the defaults) says about reviewing."""

    paths_ignore: tuple[str, ...] = ()
    max_files: int = 300
    max_file_bytes: int = 1_000_000
    settings_path: str | None = None  # the bot's own settings file (``.github/{slug}.yml``)


@dataclass(frozen=True, slots=True)
class PriorFinding:
    """An open thread of the bot at re-review: the finding it holds and the replies in it."""

    rule: str
    path: str
    line: int
    message: str
    replies: tuple[str, ...] = ()  # "login: text", oldest first


@dataclass(frozen=True, slots=True)
class ModelOptions:
    """What the repository says about the language-model reviewer (``review.llm``,
    ``review.instructions`` and ``.github/revbot-instructions.md`` from the default branch)."""

    blockers: bool = False
    max_findings: int = 10
    instructions: str = ""
    skip_drafts: bool = True
    skip_title_keywords: tuple[str, ...] = ()
    skip_labels: tuple[str, ...] = ()
    skip_authors: tuple[str, ...] = ()
    skip_paths: tuple[str, ...] = ()
    learnings: str = ""  # disputes remembered for the repository (from the database), one per line


@dataclass(frozen=True, slots=True)
class PullContext:
    repo: str  # "owner/name", or a local label for ``review --git``
    pr_number: int | None
    title: str
    author_login: str | None
    base_sha: str
    head_sha: str
    files: tuple[ChangedFile, ...]
    read: ContentReader
    settings: ReviewSettings = field(default_factory=ReviewSettings)
    files_truncated: bool = False  # GitHub lists at most 3000 files
    # For the language-model reviewer and the injection check (untrusted, like everything above).
    body: str = ""
    labels: tuple[str, ...] = ()
    draft: bool = False
    installation_id: int | None = None
    model: ModelOptions = field(default_factory=ModelOptions)
    prior: tuple[PriorFinding, ...] = ()  # the bot's open threads, at re-review
    tree: TreeReader | None = None  # the layout at head; None: analysers work from the changed files
    # The same reader at the base branch's tip; None: not available (no repository lint
    # configuration then). The engine reads the lint configuration here, and the base side of a
    # changed file only where rebuilding it from the patch (the merge base) fails.
    read_base: ContentReader | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    path: str
    line: int  # RIGHT-side line at head (1-based); for a multi-line finding, its last line
    severity: Severity
    rule: str  # e.g. "python/F821", "secrets/private-key", "conflict-marker"
    message: str  # one short sentence; never repeats a secret
    fingerprint: str  # stable across line shifts: rule + path + normalised flagged text
    start_line: int | None = None  # first line of a multi-line finding
    suggestion: str | None = None  # replacement text for the lines start_line..line
    inline: bool = True  # False: summarised in the review body, never an inline comment
    # rule + normalised flagged text, no path: recognises the finding in a renamed file
    content: str = ""
    # What was flagged, where the message alone does not say it (a workflow expression, a digest
    # of a secret, the ref a job checks out): part of the problem key, so a decision about one
    # finding never withdraws another that reads the same (``rounds.identity``).
    evidence: str = ""
    # The rule's documentation, from the analyzer (never inside ``message``, where the text
    # defuser would make it a dead link): posted as a live link when ``inert.docs_link`` allows.
    docs: str = ""

    @property
    def problem(self) -> str:
        """What the problem key is made of besides the rule and path."""
        return f"{self.message}\0{self.evidence}" if self.evidence else self.message


class SkipCause(enum.StrEnum):
    """Who decided a file was not analysed. Only the repository's own settings (read from the
    base) or having nothing to analyse leave an approval possible; whatever the pull request
    controls (a name, a header, a size, a limit it trips, a tool it crashes) does not."""

    NOTHING = "nothing"  # removed, or renamed without changes
    REPOSITORY = "repository"  # the base's review.paths_ignore or lint excludes
    PULL_REQUEST = "pull-request"


@dataclass(frozen=True, slots=True)
class Skipped:
    path: str
    reason: str  # "ignored by review.paths_ignore", "generated or vendored", "patch omitted by GitHub", ...
    cause: SkipCause = SkipCause.PULL_REQUEST


@dataclass(frozen=True, slots=True)
class ReviewResult:
    verdict: Verdict
    summary: str
    findings: tuple[Finding, ...]
    skipped: tuple[Skipped, ...] = ()
    analysed: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what limited the review (already in ``summary``)
    # Set by the language-model reviewer: why this review must not approve (text addressing an
    # AI reviewer was found while the model reviewed), files the model did not review and why,
    # and its usage (rendered collapsed in the review body).
    withhold_approval: str | None = None
    # Whether that also keeps the bot's earlier request for changes (re-review): true unless the
    # model accounted for every file, with findings on some (``llm.trust.holds_block``).
    withheld_holds_block: bool = True
    model_skipped: tuple[Skipped, ...] = ()
    usage: tuple[str, ...] = ()
    # Not everything was analysed for a reason the pull request controls (a check that could not
    # run, a file it kept out, nothing analysed at all): never approved, and a block stays.
    incomplete: bool = False
    # Withdrawn (``rounds.overrule``): disputed on this PR by someone who may, or left out by the
    # repository's learnings. Counted in the review and the check run, never posted as findings.
    overruled: tuple[Finding, ...] = ()
    learned: tuple[Finding, ...] = ()
    # Concerns and nits that only a suppression the pull request added hides (a noqa comment,
    # a zizmor ignore comment): they stay suppressed, and the review lists them, collapsed.
    suppressed: tuple[Finding, ...] = ()
    # Would have been shown, but stood at the base already (``core.differential``): not this pull
    # request's, counted in the summary, never posted as findings.
    preexisting: tuple[Finding, ...] = ()

    # (path, head line) of everything the model's prompts showed (``eval --history``: was the
    # defect in what the model saw); empty for the built-in reviewer, which sees the hunks.
    prompt_lines: frozenset[tuple[str, int]] = frozenset()

    @property
    def holds_block(self) -> bool:
        """Whether a re-review without blockers must still leave the bot's request for changes
        standing: approval was withheld for a reason a person should look at, or the analysis
        could not confirm the fixes (``incomplete``)."""
        return self.incomplete or (self.withhold_approval is not None and self.withheld_holds_block)


@dataclass(frozen=True, slots=True)
class ModelInputs:
    """What only a reviewer that asks a model reads (gathered from GitHub by the use case, on
    request: the built-in reviewer never pays for it)."""

    model: ModelOptions = field(default_factory=ModelOptions)
    prior: tuple[PriorFinding, ...] = ()


ModelInputsReader = Callable[[], Awaitable[ModelInputs]]


class ThreadStatus(enum.StrEnum):
    """Whether the finding an open thread of the bot holds is fixed at head: re-checked by the
    analyzers that made it (``rounds.decide.thread_status``) or judged by the model
    (``llm.judge``, which maps the model's own words, ``llm.schema.ThreadAnswer``)."""

    FIXED = "fixed"
    NOT_FIXED = "present"  # the finding is still there
    CANNOT_TELL = "unknown"  # its file was not (fully) analysed, or the model cannot tell


@dataclass(frozen=True, slots=True)
class ThreadQuestion:
    """One of the bot's open threads on a finding only a model can re-check (``llm/...``).

    The judgement rests on ``code`` (the file at head around the line, and its diff); ``replies``
    are untrusted context ("login: text", from people who may ask), never evidence, and never
    part of what the answer is cached by."""

    repo: str
    pr_number: int
    thread_id: int  # the thread's root comment id
    head_sha: str
    finding: str
    code: str
    replies: tuple[str, ...] = ()
    installation_id: int | None = None
    asked_by: str | None = None  # whose reply or command asked for the judgement (their limit)


@dataclass(frozen=True, slots=True)
class ThreadJudgement:
    status: ThreadStatus
    reason: str


class Reviewer(Protocol):
    """A review engine, chosen once (``runtime``, the CLI); callers use only these methods.

    The bodies are the honest defaults of an engine without a model: subclass this protocol and
    write ``review`` to add an engine; override the rest when it asks a model."""

    @property
    @abc.abstractmethod
    def id(self) -> str:
        """What names this engine's results (the analysis cache's key): two engines, or one
        engine with another model, never share an analysis. Every engine declares its own."""
        ...

    async def review(self, context: PullContext) -> ReviewResult: ...

    async def prepare(self, context: PullContext, inputs: ModelInputsReader) -> PullContext:
        """The context this engine reviews: a model reviewer reads ``inputs`` into it."""
        return context

    def mechanical(self) -> Reviewer:
        """The engine whose findings are re-checked at head by the analyzers that made them
        (a model never judges a built-in finding)."""
        return self

    def judges_threads(self) -> bool:
        """Whether ``judge_thread`` can say more than "cannot tell" (worth reading the code)."""
        return False

    async def judge_thread(self, question: ThreadQuestion) -> ThreadJudgement | None:
        """Fixed / not fixed / cannot tell for one thread on a model finding; None: no answer."""
        return None

    def health(self) -> Mapping[str, object] | None:
        """For ``/healthz``: the state of what the engine depends on (None: nothing)."""
        return None

    def tokens_used(self) -> int:
        """Model tokens used since the engine was made (``eval``)."""
        return 0

    async def aclose(self) -> None:
        """Release what the engine holds (a model client's connections)."""
        return None
