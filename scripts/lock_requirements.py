"""Write ``requirements.txt``: every package ``pip install ".[llm]"`` would install, pinned.

Heroku's Python buildpack (and anyone who wants the exact set the project was tested with)
reads ``requirements.txt``, and so does the Docker image (and Fly, which builds it): the model
reviewer's SDKs (the ``llm`` extra) are in it, so ``REVIEWER=llm`` runs on every platform with no
file edited. ``pyproject.toml`` stays the source of truth. Run after changing
its dependencies (``tests/test_deploy.py`` fails until you do):

    python scripts/lock_requirements.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = """\
# Generated from pyproject.toml by scripts/lock_requirements.py: do not edit by hand.
# The project with its llm extra (the model reviewer's SDKs): Heroku's Python buildpack and the
# Dockerfile (so Fly too) install these; the app runs from the checkout (python -m app serve).
"""


def resolve() -> list[tuple[str, str]]:
    """(name, version) of everything pip would install for the project and its ``llm`` extra,
    without installing it."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
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
                f"{ROOT}[llm]",
            ],
            check=True,
        )
        installs = json.loads(report.read_text())["install"]
    pins = {(i["metadata"]["name"], i["metadata"]["version"]) for i in installs}
    return sorted(((n, v) for n, v in pins if n != "revbot"), key=lambda pin: pin[0].lower())


def main() -> None:
    lines = [f"{name}=={version}" for name, version in resolve()]
    (ROOT / "requirements.txt").write_text(HEADER + "\n".join(lines) + "\n")
    print(f"requirements.txt: {len(lines)} packages pinned")


if __name__ == "__main__":
    main()
