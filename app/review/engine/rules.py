"""The rule catalogue as text: what the built-in reviewer can say, and why (``python -m app
rules``; docs/rules.md's table is this output, checked by ``tests/test_review_rules.py``)."""

from __future__ import annotations

from ..analyzers import Analyzer, catalogue

__all__ = ["rules_markdown"]


def rules_markdown(analyzers: list[Analyzer] | None = None) -> str:
    """A Markdown table: rule, analyzer, severity, where it is reported, what it means."""
    lines = [
        "| rule | analyzer | severity | reported on | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, rule in catalogue(analyzers):
        severity = rule.severity.label if rule.severity is not None else "by code"
        where = "the whole file" if rule.file_level else "changed lines"
        lines.append(f"| `{rule.id}` | {name} | {severity} | {where} | {rule.description} |")
    return "\n".join(lines) + "\n"
