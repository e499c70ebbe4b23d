"""Every documented install of the project uses the lock: the versions a newcomer gets are the
ones the suite tested and the deploy runs (``requirements.txt``; with the test extra,
``requirements-test.txt``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The README and every page of the documentation (docs/: the site, CONTRIBUTING and SECURITY too).
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("**/*.md")])
# ``pip install`` of the project itself: editable or not, with or without extras.
PROJECT_INSTALL = re.compile(
    r"pip install (?:-q )?(?:-e )?(?:\.|\"\.\[[a-z,]+\]\"|'\.\[[a-z,]+\]')(?=\s|`|$)"
)


def install_lines() -> list[tuple[str, str]]:
    found = []
    for document in DOCUMENTS:
        for line in document.read_text(encoding="utf-8").splitlines():
            if PROJECT_INSTALL.search(line):
                found.append((document.relative_to(ROOT).as_posix(), line.strip()))
    return found


def test_the_documents_have_install_lines() -> None:
    # the two commands, deploying, the model reviewer, contributing: each where a reader finds it
    where = {document for document, _ in install_lines()}
    assert where >= {"README.md", "docs/deploy/index.md", "docs/llm.md", "docs/CONTRIBUTING.md"}
    assert len(install_lines()) >= 5


@pytest.mark.parametrize(("document", "line"), install_lines())
def test_every_install_of_the_project_uses_the_lock(document: str, line: str) -> None:
    lock = "requirements-test.txt" if "[test]" in line else "requirements.txt"
    assert f"-c {lock}" in line, f"{document}: {line}"
