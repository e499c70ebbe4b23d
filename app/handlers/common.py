"""Services the handlers share: the repository config loader (cached briefly) and small helpers."""

from __future__ import annotations

import logging
import time

from cachetools import TTLCache

from ..config import RepoConfig, parse_repo_config
from ..github import InstallationClient, get_file_text

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
