"""What every command shares: its exit statuses and how it reads the settings (a bad setting is
one line naming it, exit status 2)."""

from __future__ import annotations

import argparse
import sys
from typing import TypeAlias

from ..settings.config import ConfigError, ReviewerSettings, Settings, load_reviewer_settings, load_settings

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"  # what add_commands adds to

EXIT_CONFIG = 2
EXIT_RUNTIME = 1


def settings_or_exit() -> tuple[Settings, str]:
    try:
        return load_settings()
    except ConfigError as exc:
        print(f"revbot: configuration error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None


def reviewer_settings() -> ReviewerSettings | None:
    """The settings the review is made with, as ``serve`` reads them; None after a problem (said)."""
    try:
        return load_reviewer_settings()
    except ConfigError as exc:
        print(f"revbot: configuration error: {exc}", file=sys.stderr)
        return None
