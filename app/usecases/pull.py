"""Reading a pull request for the engine: the repository's settings (cached), its changed files and
a reader at the head commit (``build_context``), and the engine's result (cached by content)."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gidgethub
from cachetools import LRUCache, TTLCache

from ..github import calls as github
from ..github.calls import get_file_text
from ..github.client import GitHubClient
from ..review.core.diff import added_text
from ..review.core.model import (
    ChangedFile,
    FileContent,
    PullContext,
    RepoTree,
    Reviewer,
    ReviewResult,
    ReviewSettings,
)
from ..review.engine.inert import code, escape
from ..settings.repoconfig import RepoConfig, parse_repo_config

log = logging.getLogger(__name__)

CONFIG_TTL_SECONDS = 60.0
MAX_LISTED_FILES = 3000  # GitHub lists at most this many changed files


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """A repository's settings, where they came from, and why the defaults apply if they do."""

    config: RepoConfig
    source: str | None  # "owner/repo:.github/slug.yml", None when no file exists
    problem: str | None  # the file was unusable (the defaults apply)

    def problem_note(self) -> str | None:
        """The sentence shown to the repository's people (the check run's summary)."""
        if self.problem is None:
            return None
        source = code(self.source or "")
        return f"**Settings ignored:** {source} {escape(self.problem)}. Fix the file to apply it."


async def _read_optional(gh: GitHubClient, *, repo: str, path: str) -> str | None:
    """A file the App may not be able to see (another repository of the owner): None then."""
    try:
        return await get_file_text(gh, repo=repo, path=path)
    except gidgethub.BadRequest as exc:
        if int(exc.status_code) in (403, 404):
            return None
        raise


def settings_path(slug: str) -> str:
    """The bot's settings file in a repository (read from the default branch)."""
    return f".github/{slug}.yml"


def review_settings(config: RepoConfig, slug: str | None) -> ReviewSettings:
    """What the engine takes from the repository's settings. ``slug``: the bot's, whose settings
    file a pull request may change (reported, never applied)."""
    return ReviewSettings(
        paths_ignore=config.review.paths_ignore,
        max_files=config.review.max_files,
        settings_path=settings_path(slug) if slug is not None else None,
    )


class RepoConfigs:
    """``.github/{slug}.yml`` per repository, falling back to the owner's ``.github`` repository
    (as Probot's config plugin does), read through the contents API and cached for a minute so a
    burst of deliveries for one repository reads it once."""

    def __init__(self, *, ttl: float = CONFIG_TTL_SECONDS, maxsize: int = 1024) -> None:
        self._cache: TTLCache[str, LoadedConfig] = TTLCache(maxsize=maxsize, ttl=ttl, timer=time.monotonic)

    async def get(self, gh: GitHubClient, *, repo: str, slug: str) -> RepoConfig:
        return (await self.load(gh, repo=repo, slug=slug)).config

    async def load(self, gh: GitHubClient, *, repo: str, slug: str) -> LoadedConfig:
        cached = self._cache.get(repo)
        if cached is not None:
            return cached
        path = settings_path(slug)
        source, text = repo, await get_file_text(gh, repo=repo, path=path)
        owner_defaults = f"{repo.partition('/')[0]}/.github"
        if text is None and owner_defaults.lower() != repo.lower():
            source, text = owner_defaults, await _read_optional(gh, repo=owner_defaults, path=path)
        return self.loaded(repo, path=path, source=source if text is not None else None, text=text)

    def loaded(self, repo: str, *, path: str, source: str | None, text: str | None) -> LoadedConfig:
        """The settings of ``repo`` from a file read elsewhere (``source``: the repository it was
        read from, None when there is none), cached as ``load`` caches what it reads."""
        config, problem = parse_repo_config(text)
        loaded = LoadedConfig(config, f"{source}:{path}" if source is not None else None, problem)
        if problem:
            log.warning("%s: %s", loaded.source, problem)
        self._cache[repo] = loaded
        return loaded


class AnalysisCache:
    """Recent engine results keyed by what was analysed: a re-review of a head whose analysed
    files (blob, patch) and settings are unchanged re-uses the earlier analysis instead of
    reading the files and running the analyzers again."""

    def __init__(self, *, maxsize: int = 256) -> None:
        self._results: LRUCache[str, ReviewResult] = LRUCache(maxsize=maxsize)

    @staticmethod
    def key(repo: str, files: Sequence[ChangedFile], settings: object) -> str | None:
        """None when a file lacks its blob sha (no safe way to tell it is unchanged)."""
        digest = hashlib.sha256(f"{repo}\0{settings!r}".encode())
        for f in sorted(files, key=lambda f: f.path):
            if f.blob_sha is None and f.status != "removed":
                return None
            patch = hashlib.sha1((f.patch or "").encode(), usedforsecurity=False).hexdigest()
            digest.update(f"\0{f.path}\0{f.status}\0{f.blob_sha}\0{patch}".encode())
        return digest.hexdigest()

    def get(self, key: str | None) -> ReviewResult | None:
        return None if key is None else self._results.get(key)

    def put(self, key: str | None, result: ReviewResult) -> None:
        if key is not None:
            self._results[key] = result


def changed_files(raw: Sequence[Mapping[str, Any]]) -> tuple[ChangedFile, ...]:
    return tuple(
        ChangedFile(
            path=str(f["filename"]),
            status=str(f.get("status", "modified")),
            patch=f.get("patch"),
            additions=int(f.get("additions") or 0),
            deletions=int(f.get("deletions") or 0),
            previous_path=f.get("previous_filename"),
            blob_sha=f.get("sha"),
        )
        for f in raw
    )


async def build_context(
    gh: GitHubClient, *, repo: str, pull: Mapping[str, Any], config: RepoConfig, slug: str | None = None
) -> PullContext:
    """The engine's view of a PR: its files (all pages), a batched reader at the head commit and
    one at the base (where the lint configuration is read). ``slug``: the bot's, whose settings
    file a pull request may change (reported, never applied)."""
    head_sha = str(pull["head"]["sha"])
    raw_files = await github.list_pull_files(gh, repo=repo, pr_number=int(pull["number"]))
    files = changed_files(raw_files)

    async def read_at(ref: str, paths: Sequence[str]) -> Mapping[str, FileContent | None]:
        blobs = await github.read_blobs(gh, repo=repo, ref=ref, paths=paths)
        return {
            path: None
            if blob is None
            else FileContent(text=blob.text, size=blob.size, is_binary=blob.is_binary)
            for path, blob in blobs.items()
        }

    # An added file's text is all in its patch: served from there when its blob id says it is
    # the file's, which saves GitHub a content read for most new files.
    rebuilt = {
        f.path: FileContent(text=text, size=len(text.encode("utf-8")))
        for f in files
        if f.status == "added" and (text := added_text(f.patch, f.blob_sha)) is not None
    }

    async def read(paths: Sequence[str]) -> Mapping[str, FileContent | None]:
        wanted = [p for p in paths if p not in rebuilt]
        read_now = await read_at(head_sha, wanted) if wanted else {}
        return {p: rebuilt[p] if p in rebuilt else read_now.get(p) for p in paths}

    async def read_base(paths: Sequence[str]) -> Mapping[str, FileContent | None]:
        # The base branch's tip, as the pull request event gives it: only for a file whose base
        # side could not be rebuilt from its patch (the engine's first choice: the merge base).
        return await read_at(str(pull["base"]["sha"]), paths)

    async def tree() -> RepoTree | None:
        try:
            listing = await github.read_tree(gh, repo=repo, sha=head_sha)
        except gidgethub.BadRequest as exc:  # 404/409/422: review without the layout; 5xx is retried
            log.warning("the tree of %s at %s could not be read (%s)", repo, head_sha, exc.status_code)
            return None
        return RepoTree.of(listing.blobs, listing.symlinks, truncated=listing.truncated)

    return PullContext(
        repo=repo,
        pr_number=int(pull["number"]),
        title=str(pull.get("title") or ""),
        author_login=(pull.get("user") or {}).get("login"),
        base_sha=str(pull["base"]["sha"]),
        head_sha=head_sha,
        files=files,
        read=read,
        settings=review_settings(config, slug),
        files_truncated=len(raw_files) >= MAX_LISTED_FILES,
        body=str(pull.get("body") or ""),
        labels=tuple(str(label.get("name")) for label in pull.get("labels") or () if label.get("name")),
        draft=bool(pull.get("draft")),
        installation_id=gh.installation_id,
        tree=tree,
        read_base=read_base,
    )


async def analyse(pull_context: PullContext, *, reviewer: Reviewer, analyses: AnalysisCache) -> ReviewResult:
    """Run the engine ``reviewer``, or re-use its result for exactly the same analysed content,
    description and repository options."""
    key = analyses.key(
        pull_context.repo,
        pull_context.files,
        (reviewer.id, pull_context.settings, pull_context.body, pull_context.model),
    )
    cached = analyses.get(key)
    if cached is not None:
        log.info("analysed files unchanged since an earlier review; re-using its analysis")
        return cached
    result = await reviewer.review(pull_context)
    analyses.put(key, result)
    return result
