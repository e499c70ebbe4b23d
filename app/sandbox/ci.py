"""What other integrations do to a pull request in the fake: CI and reviewer bots.

Commit statuses (the Statuses API: any integration or person sets a ``context`` on a commit),
check runs of Apps other than the fake's own (each App has its own check suite per commit, and
the suite completes when all its runs do), and the branch rules of rulesets
(``GET /repos/{owner}/{repo}/rules/branches/{branch}``). Each write emits the webhooks GitHub
sends an App subscribed to ``status``, ``check_run`` and ``check_suite``, with the integration
as sender.
"""

from __future__ import annotations

from typing import Any

from .actions import Emit
from .errors import validation_failed
from .payloads import Shapes
from .state import CheckRun, Pull, Repo, Status, World, node_id

STATUS_STATES = ("error", "failure", "pending", "success")


def combined_state(statuses: list[Status]) -> str:
    """GitHub's combined state: failure if any errored or failed, pending if any is pending or
    none exists, else success."""
    states = {s.state for s in statuses}
    if states & {"error", "failure"}:
        return "failure"
    if not statuses or "pending" in states:
        return "pending"
    return "success"


def latest_statuses(world: World, repo: Repo, sha: str) -> list[Status]:
    """The newest status of each context on a commit, newest first."""
    latest: dict[str, Status] = {}
    for status in world.statuses:
        if status.repo == repo.key and status.sha == sha:
            latest[status.context] = status
    return sorted(latest.values(), key=lambda s: s.id, reverse=True)


class CiShapes:
    def __init__(self, shapes: Shapes) -> None:
        self.shapes = shapes
        self.world = shapes.world

    def status(self, status: Status) -> dict[str, Any]:
        repo = self.world.repo(status.repo)
        creator = self.world.user(status.creator)
        return {
            "url": f"{self.shapes.repo_api(repo)}/statuses/{status.sha}",
            "avatar_url": f"{self.shapes.web}/avatars/u/{creator.id}?v=4",
            "id": status.id,
            "node_id": status.node_id,
            "state": status.state,
            "description": status.description,
            "target_url": status.target_url,
            "context": status.context,
            "created_at": status.created_at,
            "updated_at": status.updated_at,
        }

    def combined(self, repo: Repo, sha: str) -> dict[str, Any]:
        statuses = latest_statuses(self.world, repo, sha)
        api = self.shapes.repo_api(repo)
        return {
            "state": combined_state(statuses),
            "statuses": [self.status(s) for s in statuses],
            "sha": sha,
            "total_count": len(statuses),
            "repository": self.shapes.repo(repo),
            "commit_url": f"{api}/commits/{sha}",
            "url": f"{api}/commits/{sha}/status",
        }

    def commit(self, repo: Repo, sha: str) -> dict[str, Any]:
        """A commit as the ``status`` webhook carries it."""
        found = self.world.commit(repo, sha)
        author = self.shapes.user(found.author)
        api, web = self.shapes.repo_api(repo), self.shapes.repo_web(repo)
        person = {
            "name": found.author,
            "email": f"{found.author}@users.noreply.example",
            "date": found.timestamp,
        }
        return {
            "sha": sha,
            "node_id": node_id("C", sha),
            "commit": {
                "author": person,
                "committer": person,
                "message": found.message,
                "tree": {"sha": sha, "url": f"{api}/git/trees/{sha}"},
                "url": f"{api}/git/commits/{sha}",
                "comment_count": 0,
                "verification": {"verified": False, "reason": "unsigned", "signature": None, "payload": None},
            },
            "url": f"{api}/commits/{sha}",
            "html_url": f"{web}/commit/{sha}",
            "comments_url": f"{api}/commits/{sha}/comments",
            "author": author,
            "committer": author,
            "parents": (
                [
                    {
                        "sha": found.parent,
                        "url": f"{api}/commits/{found.parent}",
                        "html_url": f"{web}/commit/{found.parent}",
                    }
                ]
                if found.parent
                else []
            ),
        }

    def status_event(self, repo: Repo, status: Status) -> dict[str, Any]:
        branches = [
            {
                "name": name,
                "commit": {"sha": sha, "url": f"{self.shapes.repo_api(repo)}/commits/{sha}"},
                "protected": False,
            }
            for name, sha in repo.branches.items()
            if sha == status.sha
        ]
        return self.shapes.envelope(
            None,
            repo,
            status.creator,
            id=status.id,
            sha=status.sha,
            name=repo.full_name,
            avatar_url=None,
            target_url=status.target_url,
            context=status.context,
            description=status.description,
            state=status.state,
            commit=self.commit(repo, status.sha),
            branches=branches,
            created_at=status.created_at,
            updated_at=status.updated_at,
        )

    def suite_event(self, repo: Repo, run: CheckRun, sender: str) -> dict[str, Any]:
        suite = self.shapes.check_suite(run)
        found = self.world.commit(repo, run.head_sha)
        runs = [r for r in self.world.check_runs.values() if r.check_suite_id == run.check_suite_id]
        suite.update(
            {
                "latest_check_runs_count": len(runs),
                "check_runs_url": f"{suite['url']}/check-runs",
                "head_commit": {
                    "id": run.head_sha,
                    "tree_id": run.head_sha,
                    "message": found.message,
                    "timestamp": found.timestamp,
                    "author": {"name": found.author, "email": f"{found.author}@users.noreply.example"},
                    "committer": {"name": found.author, "email": f"{found.author}@users.noreply.example"},
                },
            }
        )
        return self.shapes.envelope("completed", repo, sender, check_suite=suite)


class CiActions:
    """The writes of other integrations; each returns what it emitted through ``emit``."""

    def __init__(self, world: World, shapes: Shapes) -> None:
        self.world = world
        self.shapes = shapes
        self.ci = CiShapes(shapes)

    def set_status(
        self,
        repo: Repo,
        sha: str,
        context: str,
        state: str,
        creator: str,
        emit: Emit,
        *,
        description: str | None = None,
        target_url: str | None = None,
    ) -> Status:
        if state not in STATUS_STATES:
            raise validation_failed("Status", "state", "invalid")
        self.world.commit(repo, sha)
        status_id = self.world.new_id()
        now = self.world.iso()
        status = Status(
            status_id,
            node_id("SC", status_id),
            repo.key,
            sha,
            context,
            state,
            description,
            target_url,
            self.world.user(creator).login,
            now,
            now,
        )
        self.world.statuses.append(status)
        emit("status", self.ci.status_event(repo, status))
        return status

    def start_check_run(self, repo: Repo, sha: str, name: str, app: str, emit: Emit) -> CheckRun:
        """App ``app`` (a slug) creates a check run on ``sha``, in progress."""
        self.world.commit(repo, sha)
        run_id = self.world.new_id()
        run = CheckRun(
            id=run_id,
            node_id=node_id("CR", run_id),
            repo=repo.key,
            name=name,
            head_sha=sha,
            status="in_progress",
            conclusion=None,
            started_at=self.world.iso(),
            completed_at=None,
            title=None,
            summary=None,
            text=None,
            external_id="",
            details_url=None,
            check_suite_id=self.world.check_suite_id(repo, sha, app),
            app=app,
        )
        self.world.check_runs[run.id] = run
        emit("check_run", self._run_event(repo, run, "created"))
        return run

    def complete_check_run(self, repo: Repo, run: CheckRun, conclusion: str, emit: Emit) -> None:
        run.status, run.conclusion, run.completed_at = "completed", conclusion, self.world.iso()
        emit("check_run", self._run_event(repo, run, "completed"))
        suite = [r for r in self.world.check_runs.values() if r.check_suite_id == run.check_suite_id]
        if all(r.status == "completed" for r in suite):
            emit("check_suite", self.ci.suite_event(repo, run, f"{run.app}[bot]"))

    def _run_event(self, repo: Repo, run: CheckRun, action: str) -> dict[str, Any]:
        return self.shapes.envelope(
            action, repo, f"{run.app}[bot]", check_run=self.shapes.check_run(run, webhook=True)
        )

    @staticmethod
    def branch_rules(repo: Repo, branch: str) -> list[dict[str, Any]]:
        """The active rules for ``branch``: the fake keeps one set, for the default branch."""
        if branch != repo.default_branch:
            return []
        return [
            {**rule, "ruleset_source_type": "Repository", "ruleset_source": repo.full_name, "ruleset_id": 1}
            for rule in repo.rules
        ]

    def branch(self, repo: Repo, name: str) -> dict[str, Any]:
        """``GET /repos/{owner}/{repo}/branches/{branch}``: the branch, its tip, and the summary of
        its classic protection that any reader gets (GitHub leaves "require up to date" out)."""
        api, web = self.shapes.repo_api(repo), self.shapes.repo_web(repo)
        checks = repo.protection.get(name)
        summary = {"enforcement_level": "off", "contexts": [], "checks": []} if checks is None else checks
        commit = self.ci.commit(repo, repo.branches[name])
        # REST's commit says when a signature was verified; the status webhook's does not.
        commit["commit"]["verification"]["verified_at"] = None
        return {
            "name": name,
            "commit": commit,
            "_links": {"self": f"{api}/branches/{name}", "html": f"{web}/tree/{name}"},
            "protected": checks is not None,
            "protection": {"enabled": checks is not None, "required_status_checks": summary},
            "protection_url": f"{api}/branches/{name}/protection",
        }

    @staticmethod
    def required_approvals(repo: Repo, pull: Pull) -> int:
        for rule in CiActions.branch_rules(repo, pull.base_ref):
            if rule.get("type") == "pull_request":
                parameters = rule.get("parameters") or {}
                return int(parameters.get("required_approving_review_count") or 0)
        return 0
