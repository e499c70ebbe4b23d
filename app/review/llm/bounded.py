"""What the model reviewer runs inside the execution boundary (``isolation``): every parse of the
pull request's Python, as jobs answered with plain data the reviewer checks (as the built-in
reviewer's ``review.bounded``). The serving process only reads, renders and asks the model.

- ``ImportsJob``: the changed Python files' imports, resolved against the repository's tree: the
  files to read next (``related.wanted_paths``).
- ``ContextJob``: one definition index of everything read (``related.Index``, each file parsed
  once), then, for each Python file the model reviews, its related context and the lines of the
  file shown around its changes (``prompt.python_context``).

Each file is a stage (``context:<path>``). A file that does not parse or nests too deeply is a
note and loses only its related context; a limit that trips in a stage is a note, and ``settle``
runs the job again without that stage. The model reviews every file either way.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar

from ..core.diff import PatchLines
from ..isolation.child import stage
from ..isolation.limits import AnalysisError, Stage, Tripped
from ..isolation.pool import Boundary
from . import prompt, related
from .prompt import HeadContext
from .related import Related

__all__ = [
    "ContextJob",
    "Contexts",
    "FileContext",
    "ImportsJob",
    "Reviewed",
    "Wanted",
    "file_stage",
    "settle",
    "unparsable",
]

log = logging.getLogger(__name__)

MAX_TRIPS = 3  # stages left out, one by one, before the related context is given up
STAGE_SECONDS = 10.0  # one file's parse, or its context: a normal file takes milliseconds
PARSE_ERRORS = (SyntaxError, ValueError, RecursionError)
LOST = "the model reviewed the change without it"
# Where a limit trips outside any file's stage (the job's start, its deadline).
WHOLE = Stage("context", "finding the model's related context", "the model reviewed the changes without it")

R_co = TypeVar("R_co", covariant=True)


def file_stage(path: str) -> Stage:
    """One file's part of a job: its parse, or its context."""
    return Stage(f"context:{path}", f"parsing `{path}` for the model's related context", LOST, STAGE_SECONDS)


def _in(part: Stage) -> contextlib.AbstractContextManager[None]:
    return stage(part.key, part.what, part.consequence, seconds=part.seconds)


def unparsable(path: str, error: Exception) -> str:
    """The note for a file whose Python could not be parsed or walked."""
    if isinstance(error, RecursionError):
        why = "it nests too deeply (RecursionError)"
    elif isinstance(error, SyntaxError):
        why = "it does not parse as Python" + (f" (line {error.lineno})" if error.lineno else "")
    else:
        why = "it is not Python source text"
    return f"{file_stage(path).what} failed: {why}; {LOST}"


@dataclass(frozen=True, slots=True)
class Wanted:
    paths: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ImportsJob:
    changed: Mapping[str, str]  # the changed Python files: path -> text at head
    files: frozenset[str]  # the repository's tree
    left_out: frozenset[str] = frozenset()

    def result_type(self) -> type[Wanted]:
        return Wanted

    def leaving_out(self, key: str) -> ImportsJob:
        return replace(self, left_out=self.left_out | {key})

    async def run(self) -> Wanted:
        imports: dict[str, related.Imports] = {}
        for path in sorted(self.changed):
            imports[path] = {}
            part = file_stage(path)
            if part.key in self.left_out:
                continue
            # A file that does not parse is named by ContextJob, which parses it again.
            with _in(part), contextlib.suppress(*PARSE_ERRORS):
                imports[path] = related.imported_modules(path, related.parse(self.changed[path]))
        return Wanted(tuple(related.wanted_paths(imports, self.files)))


@dataclass(frozen=True, slots=True)
class Reviewed:
    """A Python file the model reviews (its text is in the job's ``texts``)."""

    path: str
    lines: PatchLines


@dataclass(frozen=True, slots=True)
class FileContext:
    path: str
    related: Related = field(default_factory=Related)
    head: HeadContext = field(default_factory=HeadContext)


@dataclass(frozen=True, slots=True)
class Contexts:
    files: tuple[FileContext, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ContextJob:
    reviewed: tuple[Reviewed, ...]
    texts: Mapping[str, str]  # everything read for related context: path -> text at head
    files: frozenset[str]  # the repository's tree
    budget_chars: int  # related context per file
    left_out: frozenset[str] = frozenset()

    def result_type(self) -> type[Contexts]:
        return Contexts

    def leaving_out(self, key: str) -> ContextJob:
        return replace(self, left_out=self.left_out | {key})

    async def run(self) -> Contexts:
        index = related.Index()
        reviewed = {item.path for item in self.reviewed}
        notes: list[str] = []
        for path in sorted(self.texts):
            part = file_stage(path)
            if part.key in self.left_out:
                continue
            with _in(part):
                try:
                    index.add(path, self.texts[path])
                except PARSE_ERRORS as error:
                    if path in reviewed:  # a file only read beside them is just not a source
                        notes.append(unparsable(path, error))
        found: list[FileContext] = []
        for item in self.reviewed:
            indexed = index.indexed(item.path)
            part = file_stage(item.path)
            if indexed is None or part.key in self.left_out:
                continue
            with _in(part):
                try:
                    context = related.related_context(
                        item.path, item.lines.added, index, self.files, budget_chars=self.budget_chars
                    )
                    python = prompt.python_context(indexed.tree, prompt.changed_lines(item.lines))
                except RecursionError as error:  # unparsing a deep expression
                    notes.append(unparsable(item.path, error))
                    continue
            head = prompt.head_context(item.lines, self.texts[item.path], python)
            found.append(FileContext(item.path, context, head))
        return Contexts(tuple(found), tuple(notes))


class Staged(Protocol[R_co]):
    """A job whose stages ``settle`` can leave out."""

    def result_type(self) -> type[R_co]: ...

    def run(self) -> Awaitable[R_co]: ...

    @property
    def left_out(self) -> frozenset[str]: ...

    def leaving_out(self, key: str) -> Staged[R_co]: ...


R = TypeVar("R")


async def settle(boundary: Boundary, job: Staged[R], notes: list[str]) -> tuple[R | None, frozenset[str]]:
    """Run ``job``; a limit that trips in a stage is noted and the job runs again without it.
    None when it cannot finish (a limit outside any stage, too many, or a defect): the model
    reviews without related context. Also the stages left out, for the next job."""
    for _ in range(MAX_TRIPS + 1):
        try:
            outcome = await boundary.run(job)
        except AnalysisError as error:
            log.warning("finding the model's related context failed: %s", error)
            notes.append(f"{WHOLE.what} failed; {WHOLE.consequence}")
            return None, job.left_out
        if not isinstance(outcome, Tripped):
            return outcome, job.left_out
        notes.append((outcome if outcome.stage is not None else replace(outcome, stage=WHOLE)).note())
        if outcome.stage is None or outcome.stage.key in job.left_out:
            break
        job = job.leaving_out(outcome.stage.key)
    return None, job.left_out
