"""A git repository with three merged pull requests whose replay figures are known exactly.

- PR #1 *a moved line*: an undefined name (a blocker), then a commit that adds a function above
  it: the finding moves down four lines and is still there at the merge.
- PR #2 *a fix*: an undefined name, then a commit that fixes it.
- PR #3 *a force-push-like history*: an undefined name; the base branch moves on and is merged
  into the PR (its base changes: the fake sees the branch rewritten), then a commit fixes it.

Every commit has a fixed time (an hour between pushes), so the replay's clock is known too.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

START = 1_700_000_000
HOUR = 3600

MOVED_BEFORE = "import os\n\n\ndef handler(request):\n    return render(request)\n"
MOVED_AFTER = (
    "import os\n\n\ndef helper():\n    return os.sep\n\n\ndef handler(request):\n    return render(request)\n"
)
BROKEN_TWO = "def total(items):\n    return sum(items) + offset\n"
FIXED_TWO = "def total(items, offset=0):\n    return sum(items) + offset\n"
BROKEN_THREE = "def area(side):\n    return side * sides\n"
FIXED_THREE = "def area(side):\n    return side * side\n"


class Repo:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.time = START

    def git(self, *args: str) -> str:
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "Alice Liddell",
            "GIT_AUTHOR_EMAIL": "alice@example.com",
            "GIT_COMMITTER_NAME": "Alice Liddell",
            "GIT_COMMITTER_EMAIL": "alice@example.com",
            "GIT_AUTHOR_DATE": f"@{self.time} +0000",
            "GIT_COMMITTER_DATE": f"@{self.time} +0000",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        done = subprocess.run(
            ["git", *args], cwd=self.path, env=env, check=True, capture_output=True, text=True
        )
        return done.stdout.strip()

    def commit(self, files: dict[str, str], message: str) -> str:
        self.time += HOUR
        for name, text in files.items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def merge(self, branch: str, number: int, title: str) -> str:
        self.time += HOUR
        self.git("checkout", "-q", "main")
        self.git(
            "merge",
            "-q",
            "--no-ff",
            branch,
            "-m",
            f"Merge pull request #{number} from alice/{branch}\n\n{title}",
        )
        return self.git("rev-parse", "HEAD")


def build(path: Path) -> dict[str, str]:
    """The repository; the merge commit of each PR by its number, and the commits it is made of."""
    path.mkdir(parents=True, exist_ok=True)
    repo = Repo(path)
    repo.git("init", "-q", "-b", "main")
    shas = {"initial": repo.commit({"src/base.py": "def base():\n    return 1\n"}, "Initial")}
    repo.git("checkout", "-q", "-b", "one")
    shas["1a"] = repo.commit({"src/one.py": MOVED_BEFORE}, "Add the handler")
    shas["1b"] = repo.commit({"src/one.py": MOVED_AFTER}, "Add a helper above it")
    shas["#1"] = repo.merge("one", 1, "Add the handler")
    repo.git("checkout", "-q", "-b", "two")
    shas["2a"] = repo.commit({"src/two.py": BROKEN_TWO}, "Add total")
    shas["2b"] = repo.commit({"src/two.py": FIXED_TWO}, "Take the offset")
    shas["#2"] = repo.merge("two", 2, "Add total")
    repo.git("checkout", "-q", "-b", "three")
    shas["3a"] = repo.commit({"src/three.py": BROKEN_THREE}, "Add area")
    repo.git("checkout", "-q", "main")
    shas["main"] = repo.commit({"src/base.py": "def base():\n    return 2\n"}, "Base moves on")
    repo.git("checkout", "-q", "three")
    repo.time += HOUR
    repo.git("merge", "-q", "--no-ff", "main", "-m", "Merge branch 'main' into three")
    shas["3b"] = repo.git("rev-parse", "HEAD")
    shas["3c"] = repo.commit({"src/three.py": FIXED_THREE}, "Fix the name")
    shas["#3"] = repo.merge("three", 3, "Add area")
    return shas
