"""The built-in reviewer's analyzers, composed: ``default_analyzers`` and their rule catalogue.

The shared types live in ``base`` (re-exported here for callers); every analyzer module imports
``base``, never this package, so there is no parent/child import cycle.
"""

from __future__ import annotations

from .api import ApiBreakAnalyzer
from .base import (
    AnalysisInput,
    Analyzer,
    AnalyzerOutput,
    FileUnderReview,
    Rule,
    finding,
    fingerprint,
    is_js,
    is_python,
    is_test_path,
    strip_python_noise,
)
from .config_change import ConfigChangeAnalyzer
from .conflicts import ConflictMarkerAnalyzer
from .debug import DebugAnalyzer
from .dockerfile import HADOLINT, DockerfileAnalyzer
from .external import Tool, find_tool
from .hygiene import HygieneAnalyzer
from .injection import InjectionAnalyzer
from .likely_bugs import LikelyBugAnalyzer
from .python import PythonAnalyzer
from .secrets import SecretsAnalyzer
from .shell import SHELLCHECK, ShellAnalyzer
from .workflows import ZIZMOR, WorkflowAnalyzer

__all__ = [
    "LINTERS",
    "AnalysisInput",
    "Analyzer",
    "AnalyzerOutput",
    "FileUnderReview",
    "Rule",
    "Tool",
    "catalogue",
    "default_analyzers",
    "file_level_rules",
    "find_tool",
    "finding",
    "fingerprint",
    "is_js",
    "is_python",
    "is_test_path",
    "strip_python_noise",
]

# The external linters the analyzers run (``python -m app doctor`` says which are installed).
LINTERS: tuple[Tool, ...] = (ZIZMOR, SHELLCHECK, HADOLINT)


def default_analyzers() -> list[Analyzer]:
    return [
        PythonAnalyzer(),
        SecretsAnalyzer(),
        ConflictMarkerAnalyzer(),
        DebugAnalyzer(),
        HygieneAnalyzer(),
        InjectionAnalyzer(),
        ApiBreakAnalyzer(),
        LikelyBugAnalyzer(),
        ConfigChangeAnalyzer(),
        WorkflowAnalyzer(),
        ShellAnalyzer(),
        DockerfileAnalyzer(),
    ]


def catalogue(analyzers: list[Analyzer] | None = None) -> list[tuple[str, Rule]]:
    """(analyzer name, rule) for every rule the analyzers declare, in their order."""
    return [
        (a.name, rule)
        for a in (analyzers if analyzers is not None else default_analyzers())
        for rule in a.rules
    ]


def file_level_rules(analyzers: list[Analyzer]) -> frozenset[str]:
    """The rules reported wherever they are in a file (the engine keeps them off changed lines)."""
    return frozenset(rule.id for _, rule in catalogue(analyzers) if rule.file_level)
