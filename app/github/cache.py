"""Conditional requests: what GitHub answered to a GET, kept so the next identical GET can ask
"has it changed?" (``If-None-Match``/``If-Modified-Since``). GitHub answers an unchanged resource
``304 Not Modified``, which does not count against the installation's primary rate limit
(docs.github.com, "Best practices for using the REST API": conditional requests).

gidgethub does the protocol itself (its ``cache`` argument: a mutable mapping of URL to
``(etag, last_modified, data, more)``); this module is only the mapping:

- **Per installation.** Each installation's client sees its own view (``for_installation``):
  one installation's answers are never offered to another's requests.
- **Bounded in bytes, not entries.** One process-wide LRU (``cachetools``) whose size is the
  encoded bytes of what it holds (``GITHUB_CACHE_BYTES``): a page of a pull request's files is a
  hundred times a review's size, so a count of entries would not bound the memory.
- **Copied out.** The data is kept encoded (msgspec, fast both ways) and decoded on each hit, so
  a caller that changes what it was given cannot change what the next caller reads.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

import msgspec
from cachetools import LRUCache

# gidgethub's entry: (etag, last_modified, data, the next page's URL)
Entry = tuple[str | None, str | None, Any, str | None]
_Stored = tuple[str | None, str | None, bytes, str | None]
_OVERHEAD = 256  # bytes for the key, the headers and the tuple, so tiny answers are not free


def _size(stored: _Stored) -> int:
    return len(stored[2]) + _OVERHEAD


class ResponseCache:
    """The process's GET answers, at most ``max_bytes`` of them (least recently used goes first)."""

    def __init__(self, max_bytes: int) -> None:
        self._lru: LRUCache[tuple[int, str], _Stored] = LRUCache(maxsize=max_bytes, getsizeof=_size)

    def for_installation(self, installation_id: int) -> InstallationCache:
        return InstallationCache(self._lru, installation_id)

    @property
    def bytes(self) -> int:
        return int(self._lru.currsize)


class InstallationCache(MutableMapping[str, Entry]):
    """One installation's view of the process's ``ResponseCache``: gidgethub's ``cache``."""

    def __init__(self, lru: LRUCache[tuple[int, str], _Stored], installation_id: int) -> None:
        self._lru = lru
        self._installation = installation_id

    def __getitem__(self, url: str) -> Entry:
        etag, last_modified, encoded, more = self._lru[(self._installation, url)]
        return etag, last_modified, msgspec.json.decode(encoded), more

    def __setitem__(self, url: str, entry: Entry) -> None:
        etag, last_modified, data, more = entry
        stored = (etag, last_modified, msgspec.json.encode(data), more)
        if _size(stored) > self._lru.maxsize:
            self._lru.pop((self._installation, url), None)  # larger than the whole cache: not kept
            return
        self._lru[(self._installation, url)] = stored

    def __delitem__(self, url: str) -> None:
        del self._lru[(self._installation, url)]

    def __iter__(self) -> Iterator[str]:
        return iter([url for installation, url in list(self._lru) if installation == self._installation])

    def __len__(self) -> int:
        return sum(1 for installation, _ in list(self._lru) if installation == self._installation)
