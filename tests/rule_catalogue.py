"""The rule catalogue is the source of rule ids: what a finding says it broke is a rule an
analyzer declares (``analyzers.catalogue``, the table of docs/rules.md), or one of a declared family
(``python/<ruff code>``: its id up to ``<``). ``checked_analysers`` makes every built-in analyzer,
and the built-in reviewer, check the findings they report in the test process against it: each
table-driven case of the analyzers' tests, and each review of the engine's and the end-to-end
tests, is a case of this rule too (``conftest`` applies it to every test)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence

import pytest

from app.review.analyzers import AnalysisInput, Analyzer, AnalyzerOutput, catalogue, default_analyzers
from app.review.core.model import Finding, PullContext, ReviewResult
from app.review.engine.builtin import BuiltinReviewer

Analyse = Callable[[Analyzer, AnalysisInput], Awaitable[AnalyzerOutput]]
Review = Callable[[BuiltinReviewer, PullContext], Awaitable[ReviewResult]]


def _ids(analyzers: Sequence[Analyzer] | None) -> tuple[frozenset[str], tuple[str, ...]]:
    ids = [rule.id for _, rule in catalogue(list(analyzers) if analyzers is not None else None)]
    return frozenset(i for i in ids if "<" not in i), tuple(i.split("<", 1)[0] for i in ids if "<" in i)


@functools.cache
def _builtin_ids() -> tuple[frozenset[str], tuple[str, ...]]:
    return _ids(None)


def uncatalogued(rules: Iterable[str], analyzers: Sequence[Analyzer] | None = None) -> set[str]:
    """The rule ids of ``rules`` that the catalogue (of ``analyzers``, default: the built-in
    ones) does not list."""
    exact, families = _builtin_ids() if analyzers is None else _ids(analyzers)
    return {rule for rule in rules if rule not in exact and not rule.startswith(families)}


def _refuse_unknown(
    who: str, findings: Iterable[Finding], analyzers: Sequence[Analyzer] | None = None
) -> None:
    unknown = uncatalogued((f.rule for f in findings), analyzers)
    assert not unknown, f"{who} reported rules the catalogue does not list: {sorted(unknown)}"


def _checked_analyse(analyse: Analyse) -> Analyse:
    @functools.wraps(analyse)
    async def checked(self: Analyzer, batch: AnalysisInput) -> AnalyzerOutput:
        output = await analyse(self, batch)
        _refuse_unknown(type(self).__name__, output.findings)
        return output

    return checked


def _checked_review(review: Review) -> Review:
    @functools.wraps(review)
    async def checked(self: BuiltinReviewer, context: PullContext) -> ReviewResult:
        result = await review(self, context)
        _refuse_unknown("BuiltinReviewer", result.findings, self.analyzers)
        return result

    return checked


@functools.cache
def _kinds() -> tuple[type[Analyzer], ...]:
    return tuple(dict.fromkeys(type(a) for a in default_analyzers()))


def checked_analysers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """For one test: each built-in analyzer's ``analyse`` and ``BuiltinReviewer.review`` fail on
    a finding whose rule the catalogue lacks."""
    for kind in _kinds():
        monkeypatch.setattr(kind, "analyse", _checked_analyse(kind.analyse))
    monkeypatch.setattr(BuiltinReviewer, "review", _checked_review(BuiltinReviewer.review))
    yield
