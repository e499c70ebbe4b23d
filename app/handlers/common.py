"""Services the handlers share: the repository config loader (cached briefly) and small helpers."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence

from cachetools import LRUCache, TTLCache

from ..config import RepoConfig, parse_repo_config
from ..github import InstallationClient, get_file_text
from ..review.model import ChangedFile, ReviewResult

log = logging.getLogger(__name__)

CONFIG_TTL_SECONDS = 60.0


class RepoConfigs:
    """``.github/{slug}.yml`` per repository, read through the contents API and cached for a minute
    so a burst of deliveries for one repository reads it once."""

    def __init__(self, *, ttl: float = CONFIG_TTL_SECONDS, maxsize: int = 1024) -> None:
        self._cache: TTLCache[str, RepoConfig] = TTLCache(maxsize=maxsize, ttl=ttl, timer=time.monotonic)

    async def get(self, gh: InstallationClient, *, repo: str, slug: str) -> RepoConfig:
        cached = self._cache.get(repo)
        if cached is not None:
            return cached
        path = f".github/{slug}.yml"
        config, problem = parse_repo_config(await get_file_text(gh, repo=repo, path=path))
        if problem:
            log.warning("%s in %s: %s", path, repo, problem)
        self._cache[repo] = config
        return config


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
