"""The ruff version a repository pins: a pre-commit hook's ``rev`` (or the ``# frozen: vX`` of a
frozen sha), or ``ruff==X`` in ``pyproject.toml`` or a requirements file. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

__all__ = ["RuffPin", "hook_pin", "requirement_pin", "version_tuple"]

_VERSION = re.compile(r"v?(\d+(?:\.\d+)*)")
_RUFF_REQUIREMENT = re.compile(r"""(?im)(?:^|["'\s,\[])ruff\s*(?:\[[^\]]*\])?\s*===?\s*v?(\d+(?:\.\d+)+)""")
_FROZEN = re.compile(r"#\s*frozen:\s*v?(\d+(?:\.\d+)+)")
PRE_COMMIT = ".pre-commit-config.yaml"


def version_tuple(text: str) -> tuple[int, ...] | None:
    """``"v0.4.1"`` -> ``(0, 4, 1)``, normalised as ``packaging.Version`` compares (trailing zeros
    dropped: ``0.4.1.0`` is ``(0, 4, 1)``, so tuples compare as versions); None when it is not one."""
    match = _VERSION.fullmatch(text.strip())
    if match is None:
        return None
    try:
        release = list(Version(match.group(1)).release)
    except InvalidVersion:
        return None
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    return tuple(release)


@dataclass(frozen=True, slots=True)
class RuffPin:
    version: tuple[int, ...]
    source: str

    @property
    def label(self) -> str:
        """The version as ruff numbers its releases (``0.5.0``): one label per version."""
        padded = (*self.version, *(0,) * (3 - len(self.version)))
        return ".".join(str(part) for part in padded)


def hook_pin(text: str, rev: str) -> RuffPin | None:
    """The ruff version of a ``rev: v0.4.1``, or of a frozen sha (``rev: <sha>  # frozen: v0.4.1``)."""
    version = version_tuple(rev)
    if version is not None and "." in rev:
        return RuffPin(version, PRE_COMMIT)
    for line in text.splitlines():
        if rev and rev in line:
            frozen = _FROZEN.search(line)
            if frozen:
                found = version_tuple(frozen.group(1))
                return RuffPin(found, PRE_COMMIT) if found else None
    return None


def requirement_pin(path: str, text: str) -> RuffPin | None:
    """The ``ruff==X`` of a dependency list (``pyproject.toml``, ``requirements*.txt``)."""
    requirement = _RUFF_REQUIREMENT.search(text)
    version = version_tuple(requirement.group(1)) if requirement else None
    return RuffPin(version, path) if version else None
