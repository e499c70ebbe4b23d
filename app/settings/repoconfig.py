"""A repository's own settings: an optional ``.github/{slug}.yml`` on its default branch (never
the pull request's head), validated into frozen models; a broken file never stops the bot (the
defaults apply, and the check run says why)."""

from __future__ import annotations

import enum

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

DEFAULT_ALLOWED_ASSOCIATIONS = ("OWNER", "MEMBER", "COLLABORATOR")


MAX_INSTRUCTIONS_CHARS = 4_000


class SeverityName(enum.StrEnum):
    """A finding's severity as the settings name it: the labels of ``app.review.core.model.Severity``
    (the settings sit below the engine in the layers, so they name it rather than import it)."""

    NIT = "nit"
    CONCERN = "concern"
    BLOCKER = "blocker"


class ApprovalOnPush(enum.StrEnum):
    """What a push does to the bot's approval of the earlier head (an approval is for one head)."""

    REVIEW = "review"  # review the new head (the built-in review is cheap)
    DISMISS = "dismiss"  # dismiss the approval, saying why; a person asks for the next review


class ReadinessComment(enum.StrEnum):
    """When readiness speaks in the conversation (its check run always carries the state)."""

    ACTIONABLE = "actionable"  # "looks ready", and blocks a person must clear beyond the bot's review
    ALWAYS = "always"  # every state, edited in place
    NEVER = "never"  # the check run only


class LlmSkipConfig(BaseModel):
    """When the language model does not review a PR (the built-in review still runs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    drafts: bool = True
    title_keywords: tuple[str, ...] = ("[skip review]", "[no llm]")  # case-insensitive substrings
    labels: tuple[str, ...] = ()
    authors: tuple[str, ...] = ("dependabot[bot]", "renovate[bot]")
    paths: tuple[str, ...] = ()  # globs, as in review.paths_ignore: files the model is not shown


class LlmReviewConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    blockers: bool = False  # may the model's findings block a merge? (default: concerns at most)
    max_findings: int = Field(default=10, ge=0, le=100)
    skip: LlmSkipConfig = LlmSkipConfig()


class ReviewConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    approve: bool | None = None  # None: the deployment's REVIEW_APPROVE decides
    auto: bool = False  # review on opened / ready_for_review without being asked
    on_push: bool = False  # re-review on a push to a PR the bot has blocked
    approval_on_push: ApprovalOnPush = ApprovalOnPush.REVIEW  # a push to a PR the bot approved
    # No longer used: the bot's review of a head now answers every later ask of that head. Kept
    # so that files which set it stay valid (an unknown key would put the defaults in force).
    coalesce_seconds: float = Field(default=30.0, ge=0, le=3600)
    teams: tuple[str, ...] = ()  # team slugs whose review requests the bot answers
    paths_ignore: tuple[str, ...] = ()
    max_files: int = Field(default=300, ge=1, le=3000)
    max_comments: int = Field(default=30, ge=1, le=100)
    # The noise budget: findings below this severity, and nits beyond max_nits, are listed in the
    # review body instead of being inline comments.
    inline_min_severity: SeverityName = SeverityName.NIT
    max_nits: int = Field(default=5, ge=0, le=100)
    allowed_associations: tuple[str, ...] = DEFAULT_ALLOWED_ASSOCIATIONS  # who may ask, besides the author
    instructions: str | None = None  # for the model; capped at MAX_INSTRUCTIONS_CHARS when used
    learn: bool = False  # remember every accepted dispute of a maintainer (as `dismiss --always`)
    llm: LlmReviewConfig = LlmReviewConfig()


class ReadinessConfig(BaseModel):
    """``readiness:``: whether and how the bot says a pull request looks ready to merge."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool | None = None  # None: on for pull requests the bot has reviewed, off otherwise
    quiet_minutes: float = Field(default=10.0, ge=0, le=24 * 60)
    ignore_checks: tuple[str, ...] = ()  # check names (exact) that never hold the call
    drafts: bool = False  # also follow draft pull requests
    comment: ReadinessComment = ReadinessComment.ACTIONABLE


class RepoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    review: ReviewConfig = ReviewConfig()
    readiness: ReadinessConfig = ReadinessConfig()


def parse_repo_config(text: str | None) -> tuple[RepoConfig, str | None]:
    """The repository's settings and, if the file was unusable, why (the defaults apply then).

    Never raises: a broken config file must not stop the bot from working on the repository.
    """
    if text is None or not text.strip():
        return RepoConfig(), None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return RepoConfig(), f"not valid YAML ({type(exc).__name__}); using the defaults"
    if data is None:
        return RepoConfig(), None
    if not isinstance(data, dict):
        return RepoConfig(), "expected a mapping at the top level; using the defaults"
    try:
        return RepoConfig.model_validate(data), None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return RepoConfig(), f"{where}: {first['msg']}; using the defaults"
