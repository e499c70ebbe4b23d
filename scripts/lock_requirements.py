"""Write the two locks, ``requirements.txt`` and ``requirements-test.txt``, from ONE resolution.

- ``requirements.txt``: every package ``pip install ".[llm]"`` installs, pinned. Heroku's Python
  buildpack and the Docker image (so Fly too) read it; the model reviewer's SDKs (the ``llm``
  extra) are in it, so ``REVIEWER=llm`` runs on every platform with no file edited.
- ``requirements-test.txt``: the same pins and the ``test`` extra's. The README's test command
  installs with it as pip constraints (``pip install -e ".[test]" -c requirements-test.txt``),
  so the suite runs exactly the versions that are deployed, whatever the registry released
  since: a new release of a dependency cannot turn ``main`` red by itself.

``pyproject.toml`` stays the source of truth; both files are resolved together, so a package
both hold is pinned alike. Run after changing its dependencies, or to take newer releases
(``tests/test_deploy.py`` fails while a lock is stale)::

    python scripts/lock_requirements.py            # re-resolve, keeping the pins that still fit
    python scripts/lock_requirements.py --upgrade  # re-resolve to the newest releases allowed
    python scripts/lock_requirements.py --check    # list newer releases pyproject.toml allows; exit 0

``--check`` reports drift and never fails on it: the lock is a decision, taking a release is the
next one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
DEPLOY_LOCK = ROOT / "requirements.txt"
TEST_LOCK = ROOT / "requirements-test.txt"
DEPLOY_HEADER = """\
# Generated from pyproject.toml by scripts/lock_requirements.py: do not edit by hand.
# The project with its llm extra (the model reviewer's SDKs): Heroku's Python buildpack and the
# Dockerfile (so Fly too) install these; the app runs from the checkout (python -m app serve).
"""
TEST_HEADER = """\
# Generated from pyproject.toml by scripts/lock_requirements.py: do not edit by hand.
# requirements.txt and the test extra, resolved together: the README's test command installs
# with it as constraints (-c), so the suite tests the versions that are deployed.
"""


@dataclass(frozen=True)
class Resolved:
    """One package of a resolution: its pinned version and what it requires (PEP 508 strings)."""

    name: str
    version: str
    requires: tuple[str, ...]


def resolve(constraints: Mapping[str, str] | None = None) -> dict[str, Resolved]:
    """Everything pip would install for the project with its ``llm`` and ``test`` extras, without
    installing anything (keyed by canonical name): the newest versions allowed, or those of
    ``constraints`` (name -> version) where given."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        pinned = Path(scratch) / "constraints.txt"
        pinned.write_text("".join(f"{name}=={version}\n" for name, version in (constraints or {}).items()))
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--dry-run",
                "--ignore-installed",
                "--quiet",
                "--report",
                str(report),
                "--constraint",
                str(pinned),
                f"{ROOT}[llm,test]",
            ],
            check=True,
        )
        installs = json.loads(report.read_text())["install"]
    out: dict[str, Resolved] = {}
    for item in installs:
        meta = item["metadata"]
        if canonicalize_name(meta["name"]) == "revbot":
            continue
        out[canonicalize_name(meta["name"])] = Resolved(
            meta["name"], meta["version"], tuple(meta.get("requires_dist") or ())
        )
    return out


def project_requirements(*extras: str) -> list[str]:
    """The project's dependencies and those of ``extras``, as pyproject.toml declares them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    return [*project["dependencies"], *(spec for extra in extras for spec in optional[extra])]


def closure(requirements: Iterable[str], resolved: Mapping[str, Resolved]) -> set[str]:
    """The canonical names ``requirements`` pull in, walking ``resolved``'s metadata with this
    interpreter's markers (an extra's requirements only where that extra is asked for)."""
    environment = default_environment()
    seen: set[tuple[str, str]] = set()
    todo = [(Requirement(spec), "") for spec in requirements]
    while todo:
        req, extra = todo.pop()
        marker_env: dict[str, str] = {**environment, "extra": extra}  # type: ignore[dict-item]  # a TypedDict
        if req.marker is not None and not req.marker.evaluate(marker_env):
            continue
        name = canonicalize_name(req.name)
        for wanted in req.extras or {""}:
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            todo.extend((Requirement(sub), wanted) for sub in resolved[name].requires)
    return {name for name, _ in seen}


def render(header: str, pins: Iterable[Resolved]) -> str:
    ordered = sorted(pins, key=lambda pin: pin.name.lower())
    return header + "".join(f"{pin.name}=={pin.version}\n" for pin in ordered)


def read_lock(path: Path) -> dict[str, str]:
    """Canonical name -> pinned version of a lock file."""
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version
    return pins


def drift(locked: Mapping[str, str], newest: Mapping[str, str]) -> list[str]:
    """A line per package whose newest allowed release is newer than its pin, or that a fresh
    resolution adds or drops; sorted by name. Pure, so it is tested without a registry."""
    lines = []
    for name in sorted(set(locked) | set(newest)):
        old, new = locked.get(name), newest.get(name)
        if old is None:
            lines.append(f"{name}: not locked; a fresh resolution adds {new}")
        elif new is None:
            lines.append(f"{name}: locked at {old}; a fresh resolution no longer needs it")
        elif Version(new) > Version(old):
            lines.append(f"{name}: locked at {old}; {new} is allowed by pyproject.toml")
    return lines


def write(*, upgrade: bool) -> None:
    """Both locks from one resolution. Without ``upgrade`` the current pins are kept where
    pyproject.toml still allows them (a changed bound that rules one out re-resolves afresh)."""
    current: dict[str, str] = {}
    for lock in (DEPLOY_LOCK, TEST_LOCK):
        if not upgrade and lock.exists():
            current.update(read_lock(lock))
    try:
        resolved = resolve(current)
    except subprocess.CalledProcessError:
        if not current:
            raise
        print("the current pins no longer resolve with pyproject.toml; resolving afresh")
        resolved = resolve()
    deploy = closure(project_requirements("llm"), resolved)
    tested = closure(project_requirements("llm", "test"), resolved)
    DEPLOY_LOCK.write_text(render(DEPLOY_HEADER, (resolved[n] for n in deploy)))
    TEST_LOCK.write_text(render(TEST_HEADER, (resolved[n] for n in tested)))
    print(f"{DEPLOY_LOCK.name}: {len(deploy)} packages pinned; {TEST_LOCK.name}: {len(tested)}")


def check() -> None:
    try:
        resolved = resolve()
    except subprocess.CalledProcessError as exc:
        print(f"could not resolve against the registry (pip exited {exc.returncode}); nothing checked")
        return
    tested = closure(project_requirements("llm", "test"), resolved)
    lines = drift(read_lock(TEST_LOCK), {n: resolved[n].version for n in tested})
    print("\n".join(lines) if lines else f"{TEST_LOCK.name} is current: no newer release is allowed")
    if lines:
        print(f"{len(lines)} to take, when wanted: python scripts/lock_requirements.py --upgrade")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument(
        "--check", action="store_true", help="list newer releases pyproject.toml allows; always exits 0"
    )
    action.add_argument("--upgrade", action="store_true", help="take the newest releases allowed")
    args = parser.parse_args(argv)
    if args.check:
        check()
    else:
        write(upgrade=args.upgrade)


if __name__ == "__main__":
    main()
