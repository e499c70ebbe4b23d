"""No setting goes undocumented: every environment setting of ``Settings`` is a row of the
configuration reference's table, and every key of ``.github/revbot.yml`` (nested ones included)
is in its example file, which the bot reads as valid. And the README, which MkDocs does not
check, links only to pages that are there; and the site's build fails on what MkDocs can check."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from app.settings.config import Settings
from app.settings.repoconfig import RepoConfig, parse_repo_config

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs/configuration.md"
# Read from the environment by ``python -m app setup`` (``GITHUB_URL``) or by ``review
# OWNER/REPO#N`` (``GITHUB_TOKEN``), or written by ``setup`` for completeness
# (``GITHUB_CLIENT_ID``), not by the bot's settings: documented all the same.
OUTSIDE_SETTINGS = {"GITHUB_URL", "GITHUB_CLIENT_ID", "GITHUB_TOKEN"}


def documented_settings() -> set[str]:
    """Every env var named in the first column of the reference's environment settings table."""
    table = REFERENCE.read_text(encoding="utf-8").split("## Environment settings", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in table.splitlines():
        if line.startswith("| `"):
            names.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", line.split("|")[1]))
    return names


def environment_names() -> set[str]:
    """The variable each field of ``Settings`` is read from: pydantic-settings reads a field
    without an alias from its prefixed name, case-insensitively."""
    prefix = Settings.model_config.get("env_prefix", "")
    aliased = {n for n, f in Settings.model_fields.items() if f.alias or f.validation_alias}
    assert not aliased, f"an alias changes the variable's name: teach environment_names {aliased}"
    return {f"{prefix}{name}".upper() for name in Settings.model_fields}


def test_every_environment_setting_is_in_the_reference() -> None:
    names = environment_names()
    assert len(names) > 60
    assert names - documented_settings() == set()


def test_the_reference_names_no_setting_that_is_gone() -> None:
    assert documented_settings() - environment_names() == OUTSIDE_SETTINGS


def model_keys(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    """Every key a file may set, as a dotted path: the nested models' keys too."""
    for name, field in model.model_fields.items():
        yield f"{prefix}{name}"
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            yield from model_keys(field.annotation, f"{prefix}{name}.")


def file_keys(data: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for name, value in data.items():
        yield f"{prefix}{name}"
        if isinstance(value, dict):
            yield from file_keys(value, f"{prefix}{name}.")


def documented_file() -> str:
    """The fenced example of ``.github/revbot.yml`` in the reference."""
    section = REFERENCE.read_text(encoding="utf-8").split("## A repository's settings", 1)[1]
    return section.split("```yaml\n", 1)[1].split("```", 1)[0]


def test_every_key_of_the_repository_file_is_in_the_reference() -> None:
    keys = set(model_keys(RepoConfig))
    assert {"review.llm.skip.title_keywords", "readiness.quiet_minutes"} <= keys
    assert set(file_keys(yaml.safe_load(documented_file()))) == keys


def test_the_documented_file_is_one_the_bot_accepts() -> None:
    assert parse_repo_config(documented_file())[1] is None


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize(
    "target",
    sorted({t for t in LINK.findall((ROOT / "README.md").read_text(encoding="utf-8")) if "://" not in t}),
)
def test_the_readmes_links_lead_to_pages_that_are_there(target: str) -> None:
    path, _, anchor = target.partition("#")
    page = ROOT / path
    assert page.is_file(), target
    if anchor:
        headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.MULTILINE)
        assert anchor in {slug(h) for h in headings}, target


def slug(heading: str) -> str:
    """A heading's anchor as MkDocs and GitHub both make it for the plain headings used here."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).strip().replace(" ", "-")


def build(tmp_path: Path, page: str, added: str) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict``, as CI runs it, of a copy of the site with ``added`` appended to
    ``page`` (created when it is not there)."""
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    with (tmp_path / "docs" / page).open("a", encoding="utf-8") as text:
        text.write(added)
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")]
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)


@pytest.mark.slow
def test_the_site_builds(tmp_path: Path) -> None:
    done = build(tmp_path, "index.md", "")
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("page", "added", "said"),
    [
        ("index.md", "\n[a page](nowhere.md)\n", "'nowhere.md', but the target is not found"),
        ("index.md", "\n[a heading](rules.md#nowhere)\n", "does not contain an anchor '#nowhere'"),
        ("index.md", "\n[this page](#nowhere)\n", "there is no such anchor on this page"),
        ("index.md", "\n[the README](../README.md)\n", "'../README.md', but the target is not found"),
        ("orphan.md", "# A page the nav forgot\n", "orphan.md"),
    ],
    ids=["a missing page", "a missing anchor", "a missing anchor here", "outside docs", "not in the nav"],
)
def test_the_site_build_fails_on_what_it_cannot_link(
    tmp_path: Path, page: str, added: str, said: str
) -> None:
    done = build(tmp_path, page, added)
    assert done.returncode != 0
    assert said in done.stderr
