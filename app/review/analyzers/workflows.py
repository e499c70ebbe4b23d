"""GitHub Actions workflows and action definitions: zizmor's offline audits, once over every
changed ``.github/workflows/*.y*ml`` and ``action.y*ml`` of the pull request.

Each file is first read with the bounded YAML loader (``patterns.load_yaml``): one that is no
longer YAML (its base was, or it is new) is a blocker, as GitHub will not run it; one over the
loader's caps (an alias bomb) is not handed to zizmor at all, and said so. zizmor runs with
``--offline`` (no online audit, no network), its regular persona, the repository's ``zizmor.yml``
re-written (``toolconfig``), in a temporary tree (``external``).

Severities keep the promise of no false blockers: a blocker only for zizmor's high-confidence
template injection, and for a dangerous trigger (``pull_request_target``, ``workflow_run``) in a
workflow one of whose jobs checks out the pull request's head and then runs it (a "pwn request").
zizmor's other high and medium findings are concerns, its low and informational ones (and those
it has low confidence in) nits; an action of GitHub's own (``actions/``, ``github/``) on a tag is
a nit, another's a concern.

The repository's own pinning convention wins (``pins``), read from the base side of the changed
workflows. The base side itself (``AnalysisInput.at_base``) is reported in full: what it held must
not depend on this pull request's author or its other files, as it is cached across pull requests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from ..core.codespan import code_span
from ..core.diff import base_of
from ..core.doclinks import postable_docs
from ..core.model import ChangedFile, Finding, Severity
from ..core.patterns import YamlRefused, load_yaml
from ..core.toolconfig import is_workflow, zizmor_config
from .base import AnalysisInput, AnalyzerOutput, FileUnderReview, Rule, finding
from .external import TOOL_TIMEOUT, Tool, ToolError, collect, command_for, run_tool, tool_tree, unavailable
from .pins import FIRST_PARTY, PINNED_BY_TAG, Pinning, action_refs, pinned_as_usual, pinning, unquoted
from .suppressions import suppressed_by_pull_request, zizmor_ignore_added

__all__ = [
    "INVALID_RULE",
    "UNKNOWN_KEY_RULE",
    "ZIZMOR",
    "WorkflowAnalyzer",
    "pr_code_checkouts",
    "unknown_keys",
    "zizmor_severity",
]

ZIZMOR = Tool("zizmor", "zizmor", "GitHub Actions workflows")
_PERMISSIONS = re.compile(r"^\s*['\"]?permissions['\"]?\s*:")
DEFAULT_PERMISSIONS = (
    "jobs on the default token permissions are not flagged where the workflow set none at the base"
)
INVALID_RULE = "workflow/invalid-yaml"
UNKNOWN_KEY_RULE = "workflow/unknown-key"
# A workflow's top level, as GitHub's workflow syntax defines it (``on`` is read as YAML 1.1's
# ``true`` by PyYAML); GitHub refuses to run a workflow with any other key there.
WORKFLOW_KEYS = frozenset(
    {"name", "run-name", "on", "permissions", "env", "defaults", "concurrency", "jobs", True}
)
PREFIX = "workflow/"
DANGEROUS_TRIGGERS = ("pull_request_target", "workflow_run")


def sets_no_permissions(item: FileUnderReview, batch: AnalysisInput) -> bool:
    """Whether the workflow's base side exists and sets ``permissions:`` nowhere: its jobs run
    with the repository's default token permissions by the repository's choice, and a job the
    pull request adds that does the same is not a finding (a new workflow shows no choice)."""
    side = batch.base.get(item.file.previous_path or item.path)
    if side is None or side.text is None:
        return False
    return not any(_PERMISSIONS.match(row) for row in side.text.splitlines())


def default_permissions(entry: Mapping[str, Any]) -> bool:
    """zizmor's ``excessive-permissions`` for a job that sets none (not for one that asks for
    too much, which stays a finding)."""
    if entry.get("ident") != "excessive-permissions":
        return False
    return any(
        "default permissions used" in str((location.get("symbolic") or {}).get("annotation") or "")
        for location in entry.get("locations") or ()
        if isinstance(location, dict)
    )


def _base_rows(item: FileUnderReview, batch: AnalysisInput) -> list[str]:
    """The workflow's lines as the base has them: its base side, else the head's lines the pull
    request did not add."""
    side = batch.base.get(item.file.previous_path or item.path)
    if side is not None and side.text is not None:
        return side.text.splitlines()
    return [row for number, row in enumerate(item.rows, 1) if number not in item.lines.added]


_PR_HEAD = re.compile(
    r"github\.event\.pull_request\.head\.|github\.head_ref|github\.event\.workflow_run\.head_"
    r"|refs/pull/|github\.event\.number|github\.event\.pull_request\.number"
)
# An expression whose value anyone who opens an issue, a pull request or a branch chooses.
_ATTACKER_EXPRESSION = re.compile(r"\$\{\{[^}]*\b(?:github\.event\.|github\.head_ref\b)")
_ZIZMOR_LEVELS = {"High": Severity.CONCERN, "Medium": Severity.CONCERN}
DOCS = "https://docs.zizmor.sh/audits/"
SYNTAX_DOCS = "https://docs.github.com/actions/writing-workflows/workflow-syntax-for-github-actions"


@dataclass(frozen=True, slots=True)
class Checkout:
    """A job that checks out the pull request's head and then runs something from it."""

    job: str
    ref: str  # the ``ref`` it checks out


def _triggers(workflow: Mapping[Any, Any]) -> set[str]:
    # YAML 1.1 reads a bare ``on`` key as True.
    on = workflow.get("on", workflow.get(True))
    if isinstance(on, str):
        return {on}
    if isinstance(on, list):
        return {str(t) for t in on}
    if isinstance(on, dict):
        return {str(t) for t in on}
    return set()


def pr_code_checkouts(workflow: Any) -> list[Checkout]:
    """The jobs of a workflow with a dangerous trigger that check out the pull request's head
    (``actions/checkout`` with a ``ref`` from the pull request) and have a later step that runs
    code (``run:``, or a local action ``./...``). Pure."""
    if not isinstance(workflow, dict) or not _triggers(workflow) & set(DANGEROUS_TRIGGERS):
        return []
    jobs = workflow.get("jobs")
    found: list[Checkout] = []
    for name, job in jobs.items() if isinstance(jobs, dict) else ():
        steps = job.get("steps") if isinstance(job, dict) else None
        checked_out: str | None = None
        for step in steps if isinstance(steps, list) else ():
            if not isinstance(step, dict):
                continue
            uses = str(step.get("uses") or "")
            if checked_out is None and uses.startswith("actions/checkout@"):
                ref = step.get("with", {}).get("ref") if isinstance(step.get("with"), dict) else None
                if isinstance(ref, str) and _PR_HEAD.search(ref):
                    checked_out = ref
                continue
            if checked_out is not None and ("run" in step or uses.startswith("./")):
                found.append(Checkout(str(name), checked_out))
                break
    return found


def zizmor_severity(ident: str, confidence: str, severity: str, feature: str, line: str = "") -> Severity:
    """zizmor's determinations as a severity (the pwn-request blocker aside, see ``_pwn``).
    ``feature`` is the text zizmor points at, ``line`` the line it starts on. A template
    injection blocks only when zizmor is highly confident and the expression there is one a
    stranger writes (an event's text, a branch name): a composite action's ``inputs`` come from
    the workflow that calls it, so they are a concern."""
    if ident == "template-injection" and confidence == "High" and severity == "High":
        return Severity.BLOCKER if _ATTACKER_EXPRESSION.search(line) else Severity.CONCERN
    if ident == "unpinned-uses" and unquoted(feature).startswith(FIRST_PARTY):
        return Severity.NIT
    if confidence == "Low":
        return Severity.NIT  # zizmor itself doubts it
    return _ZIZMOR_LEVELS.get(severity, Severity.NIT)


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _line_of(text: str, needle: str) -> int | None:
    for number, line in enumerate(_lines(text), 1):
        if needle in line:
            return number
    return None


@dataclass(frozen=True, slots=True)
class Reported:
    """A zizmor finding, and the suppression the pull request added that hid it (None: none)."""

    finding: Finding
    suppression: str | None = None


class WorkflowAnalyzer:
    name = "workflows"
    tools: tuple[str, ...] = ("zizmor",)
    differential: bool = True
    rules: tuple[Rule, ...] = (
        Rule(
            INVALID_RULE,
            Severity.BLOCKER,
            "a workflow or action definition that no longer parses as YAML (GitHub will not run it)",
            file_level=True,
        ),
        Rule(
            UNKNOWN_KEY_RULE,
            Severity.BLOCKER,
            "a workflow with a top-level key GitHub's workflow syntax does not have (GitHub will not run it)",
        ),
        Rule(
            f"{PREFIX}template-injection",
            None,
            "zizmor: an expression expanded into a script; a blocker when zizmor is highly confident "
            "an attacker controls it (a pull request's title in `run:`), else by its severity",
        ),
        Rule(
            f"{PREFIX}dangerous-triggers",
            None,
            "zizmor: `pull_request_target`/`workflow_run`; a blocker when a job checks out the pull "
            "request's head and runs it (a pwn request), else a concern",
        ),
        Rule(
            f"{PREFIX}<zizmor audit>",
            None,
            "zizmor's other offline audits: high or medium severity a concern, low, informational or "
            "low-confidence a nit; an action of `actions/` or `github/` on a tag a nit",
        ),
    )

    def __init__(self, *, time_limit: float = TOOL_TIMEOUT, command: Sequence[str] | None = None) -> None:
        self.time_limit = time_limit
        self.command = command

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        return [f.path for f in files if is_workflow(f.path)]

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        out = AnalyzerOutput()
        targets: dict[str, FileUnderReview] = {}
        parsed: dict[str, Any] = {}
        for path, item in collect(batch, ZIZMOR, out, is_workflow).items():
            assert item.text is not None
            try:
                parsed[path] = load_yaml(item.text)
            except YamlRefused as exc:
                unavailable(out, [path], f"{code_span(path)} was not checked ({exc})", ZIZMOR)
                continue
            except yaml.YAMLError as exc:
                out.findings.extend(self._invalid(item, exc))
                continue
            targets[path] = item
            out.findings += unknown_keys(item, parsed[path])
        if not targets:
            return out
        command = command_for(ZIZMOR, self.command, batch)
        if command is None:
            return unavailable(out, list(targets), ZIZMOR.missing(), ZIZMOR)
        config = zizmor_config(batch.configs)
        out.notes.extend(config.notes)
        try:
            reported = await self._zizmor(
                command, {p: t.text or "" for p, t in targets.items()}, config.files
            )
        except ToolError as exc:
            return unavailable(out, list(targets), f"workflows were not checked ({exc})", ZIZMOR)
        used = f" with the repository's {code_span(config.used[0])}" if config.used else ""
        out.notes.append(f"workflows checked by zizmor (offline){used}")
        base = action_refs(row for item in targets.values() for row in _base_rows(item, batch))
        convention = pinning(base)
        for item in targets.values():
            entries = [
                e
                for e in reported.get(item.path, [])
                if batch.at_base
                or e.get("ident") != "unpinned-uses"
                or not pinned_as_usual(e["feature"], convention, base, batch.author)
            ]
            dropped = len(entries) < len(reported.get(item.path, []))
            if convention is Pinning.TAG and dropped and PINNED_BY_TAG not in out.notes:
                out.notes.append(PINNED_BY_TAG)
            if not batch.at_base and sets_no_permissions(item, batch):
                kept = [e for e in entries if not default_permissions(e)]
                if len(kept) < len(entries) and DEFAULT_PERMISSIONS not in out.notes:
                    out.notes.append(DEFAULT_PERMISSIONS)
                entries = kept
            for found in self._findings(item, parsed[item.path], entries):
                if found.suppression is None:
                    out.findings.append(found.finding)
                    continue
                flagged = suppressed_by_pull_request(found.finding, found.suppression)
                if flagged is not None:
                    out.findings.append(flagged)
                else:
                    out.suppressed.append(found.finding)
        return out

    def _invalid(self, item: FileUnderReview, error: yaml.YAMLError) -> list[Finding]:
        """A blocker when the file is new or its base was YAML: the pull request broke it."""
        assert item.text is not None
        if item.file.status != "added":
            base = base_of(item.text, item.file.patch)
            try:
                if base is None:
                    return []
                load_yaml(base)
            except (YamlRefused, yaml.YAMLError):
                return []  # it was not YAML before either: not this pull request's doing
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        lines = _lines(item.text)
        problem = getattr(error, "problem", None) or "it is not valid YAML"
        return [
            finding(
                item.path,
                max(1, min(line, len(lines) or 1)),
                Severity.BLOCKER,
                INVALID_RULE,
                f"This file no longer parses as YAML ({problem}), so GitHub Actions will not run it at all.",
                lines[line - 1] if 0 < line <= len(lines) else "",
                docs=SYNTAX_DOCS,
            )
        ]

    async def _zizmor(
        self, command: list[str], files: Mapping[str, str], configs: Mapping[str, str]
    ) -> dict[str, list[dict[str, Any]]]:
        """zizmor's findings by repository path (each with ``line`` and ``feature``: its primary
        location, 1-based, and the text there)."""
        async with tool_tree({**configs, **files}) as root:
            # Every finding, the ignored ones marked: a ``# zizmor: ignore`` the pull request adds
            # never hides a blocker (``suppressions``); the base's, and its config's, are honoured.
            args = [
                *command,
                "--offline",
                "--no-ignores",
                "--format",
                "json",
                "--no-exit-codes",
                "--no-progress",
            ]
            args += ["--color", "never", "--cache-dir", str(root / ".cache")]
            args += ["--config", next(iter(configs))] if configs else ["--no-config"]
            stdout = await run_tool([*args, "--", *files], root, time_limit=self.time_limit)
        try:
            data = json.loads(stdout or b"[]")
        except ValueError:
            raise ToolError("zizmor's output is not JSON") from None
        out: dict[str, list[dict[str, Any]]] = {}
        for item in data if isinstance(data, list) else ():
            primary = self._primary(item)
            if primary is None:
                continue
            path, line, feature = primary
            if path in files:
                out.setdefault(path, []).append({**item, "line": line, "feature": feature})
        return out

    @staticmethod
    def _primary(item: Any) -> tuple[str, int, str] | None:
        if not isinstance(item, dict):
            return None
        for location in item.get("locations") or ():
            try:
                symbolic, concrete = location["symbolic"], location["concrete"]
                if symbolic["kind"] != "Primary":
                    continue
                local = symbolic["key"]["Local"]
                path = local.get("given_path") or local["verbatim_path"]
                row = int(concrete["location"]["start_point"]["row"])
                return str(path), row + 1, str(concrete.get("feature") or "")
            except (KeyError, TypeError, ValueError):
                continue
        return None

    def _findings(
        self, item: FileUnderReview, workflow: Any, reported: Sequence[dict[str, Any]]
    ) -> list[Reported]:
        """Each finding, with the ``# zizmor: ignore`` the pull request added that hid it (an
        ignored one the base or its config hid is honoured: left out)."""
        found: list[Reported] = []
        for entry in reported:
            suppression = None
            if entry.get("ignored"):
                suppression = zizmor_ignore_added(item.lines.added_text, entry["line"])
                if suppression is None:
                    continue
            found.append(Reported(self._finding(item, workflow, entry), suppression))
        return found

    def _finding(self, item: FileUnderReview, workflow: Any, entry: Mapping[str, Any]) -> Finding:
        assert item.text is not None
        lines = _lines(item.text)
        ident = str(entry.get("ident") or "unknown")
        given = entry.get("determinations")
        determinations: Mapping[str, Any] = given if isinstance(given, dict) else {}
        line: int = entry["line"]
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        severity = zizmor_severity(
            ident,
            str(determinations.get("confidence")),
            str(determinations.get("severity")),
            entry["feature"],
            text,
        )
        # zizmor's own link, when it is one the bot may post (it comes with the tool's report
        # on the pull request's files); else the audit's section of zizmor's documentation
        given = str(entry.get("url") or "")
        url = given if postable_docs(given) else f"{DOCS}#{ident}"
        if ident == "dangerous-triggers":
            pwn = self._pwn(item, workflow, line, url)
            if pwn is not None:
                return pwn
        annotation = self._annotation(entry)
        desc = str(entry.get("desc") or ident)
        message = f"{desc[:1].upper()}{desc[1:]}: {annotation} (zizmor {code_span(ident)})."
        # zizmor's annotation reads the same for every expression it flags: what it flagged
        # (the feature: the expression, the step) tells one finding from another
        evidence = str(entry.get("feature") or "")
        return finding(
            item.path, line, severity, f"{PREFIX}{ident}", message, text, evidence=evidence, docs=url
        )

    @staticmethod
    def _annotation(entry: Mapping[str, Any]) -> str:
        for location in entry.get("locations") or ():
            symbolic = location.get("symbolic") if isinstance(location, dict) else None
            if isinstance(symbolic, dict) and symbolic.get("kind") == "Primary":
                return str(symbolic.get("annotation") or "").strip() or "see the audit's documentation"
        return "see the audit's documentation"

    @staticmethod
    def _pwn(item: FileUnderReview, workflow: Any, trigger_line: int, url: str) -> Finding | None:
        """The pwn request: on the first added line among the trigger's and the checkout's."""
        assert item.text is not None
        checkouts = pr_code_checkouts(workflow)
        if not checkouts:
            return None
        checkout = checkouts[0]
        ref_line = _line_of(item.text, checkout.ref)
        candidates = [n for n in (trigger_line, ref_line) if n is not None and n in item.lines.added]
        line = candidates[0] if candidates else (ref_line or trigger_line)
        lines = _lines(item.text)
        # The job and the ref it checks out are the evidence: a harmless use of the same trigger
        # (a concern, on the same line) is another finding, and a decision about it is not this one's.
        evidence = f"{checkout.job}\0{checkout.ref}"
        return finding(
            item.path,
            line,
            Severity.BLOCKER,
            f"{PREFIX}dangerous-triggers",
            f"Job {code_span(checkout.job)} runs with this repository's secrets and write token on a "
            f"dangerous trigger, yet checks out the pull request's head ({code_span(checkout.ref)}) and "
            "runs it, so anyone who opens a pull request runs code with those rights"
            " (zizmor `dangerous-triggers`).",
            (lines[line - 1] if 0 < line <= len(lines) else "") + f"\n{evidence}",
            evidence=evidence,
            docs=url,
        )


def unknown_keys(item: FileUnderReview, document: Any) -> list[Finding]:
    """A blocker on each top-level key of a workflow (not an action definition) that GitHub's
    workflow syntax does not have: GitHub refuses to run such a workflow (a misspelt ``jobs:``, an
    ``on:`` indented by mistake). The bot's own check: zizmor audits what runs, not the syntax."""
    if not item.path.startswith(".github/workflows/") or not isinstance(document, dict):
        return []
    found: list[Finding] = []
    for key in document:
        if key in WORKFLOW_KEYS:
            continue
        name = str(key)
        line = next(
            (n for n, row in enumerate(item.rows, 1) if re.match(rf"['\"]?{re.escape(name)}['\"]?\s*:", row)),
            1,
        )
        found.append(
            finding(
                item.path,
                line,
                Severity.BLOCKER,
                UNKNOWN_KEY_RULE,
                f"{code_span(name)} is not a top-level key of a workflow (GitHub knows `name`, "
                "`run-name`, `on`, `permissions`, `env`, `defaults`, `concurrency` and `jobs`), "
                "so GitHub will not run it.",
                item.rows[line - 1] if 0 < line <= len(item.rows) else name,
                docs=SYNTAX_DOCS,
            )
        )
    return found
