"""Imports: every module of ``app`` can be the first one imported, and the layers hold.

An import cycle works or breaks depending on which of its modules is imported first, so each
module is imported first in a process where no other module of ``app`` is loaded yet: one fresh
interpreter loads the third-party packages ``app`` uses, then forks once per module, a few at a
time (a fork is a fresh ``app`` without a whole interpreter start per module).
The layer and no-cycle contracts are import-linter's, configured in ``pyproject.toml``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent

IMPORT_EACH_FIRST = r"""
import ast, importlib, json, os, pathlib, sys, traceback

root = pathlib.Path("app")
modules = sorted(
    ".".join(path.with_suffix("").parts[:-1] if path.name == "__init__.py" else path.with_suffix("").parts)
    for path in root.rglob("*.py")
)
# Load what app imports from outside app (a speed-up only: none of it imports app).
for path in root.rglob("*.py"):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            if name.split(".")[0] != "app":
                try:
                    importlib.import_module(name)
                except ImportError:
                    pass
assert not [name for name in sys.modules if name == "app" or name.startswith("app.")]
failed, running = [], {}


def reap():
    pid, status = os.wait()
    if os.waitstatus_to_exitcode(status) != 0:
        failed.append(running[pid])
    del running[pid]


for name in modules:
    while len(running) >= (os.cpu_count() or 1):
        reap()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
        os._exit(0)
    running[pid] = name
while running:
    reap()
print(json.dumps({"modules": modules, "failed": sorted(failed)}))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="needs os.fork")
def test_every_module_imports_first_in_a_fresh_interpreter() -> None:
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_EACH_FIRST], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "app.jobs.worker" in result["modules"] and len(result["modules"]) >= 50
    assert result["failed"] == [], done.stderr


def test_import_contracts_hold() -> None:
    """Layers web/worker -> routing -> handlers -> use cases -> review/github -> store/metrics ->
    events/guards/config, the GitHub client without the store or a database driver, no cycles
    beyond the documented exceptions, and no serving module importing the fake or the demo."""
    lint = "import sys, importlinter.cli as cli; sys.exit(cli.lint_imports(no_cache=True, no_logo=True))"
    done = subprocess.run([sys.executable, "-c", lint], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    kept = re.search(r"Contracts: (\d+) kept, 0 broken", done.stdout)
    assert kept is not None and int(kept.group(1)) >= 5, done.stdout


def test_the_github_client_loads_no_store_and_no_database_driver() -> None:
    """``app.github`` (with what it imports: auth, pacing, the metrics' counters) runs without the
    store: importing it loads neither ``app.store`` nor SQLAlchemy nor asyncpg. The forbidden
    contract in ``pyproject.toml`` says the same of the imports as written; this checks what a
    fresh interpreter actually loads."""
    check = (
        "import sys, app.github.calls, app.github.installation; "
        "loaded = sorted(m for m in ('asyncpg', 'sqlalchemy', 'app.store') if m in sys.modules); "
        "assert not loaded, loaded"
    )
    done = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
