"""JSON shapes, built from the world the way GitHub builds them.

One builder per object, shared by REST answers and webhook payloads, so a shape fixed once is
fixed everywhere. Where GitHub's two channels differ the builders take a flag (review ``state``
is uppercase in REST and lowercase in webhooks; a review's empty body is ``""`` in REST and
``null`` in webhooks). URLs point at the fake itself, so a client following a URL from a payload
stays offline.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .diff import FileDiff, diff_trees
from .state import (
    CheckRun,
    Installation,
    IssueComment,
    Pull,
    Reaction,
    Repo,
    Review,
    ReviewComment,
    User,
    World,
    blob_sha,
    node_id,
)

JSON = dict[str, Any]

PERMISSIONS: dict[str, str] = {
    "checks": "write",
    "contents": "read",
    "issues": "write",
    "metadata": "read",
    "pull_requests": "write",
    "statuses": "read",
}
EVENTS = [
    "check_run",
    "check_suite",
    "issue_comment",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "pull_request_review_thread",
    "push",
    "status",
]
# A check suite's conclusion is its runs' highest priority one (GitHub's checks guide).
SUITE_PRIORITY = (
    "action_required",
    "cancelled",
    "timed_out",
    "failure",
    "startup_failure",
    "stale",
    "neutral",
    "success",
    "skipped",
)
REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")


@dataclass
class AppInfo:
    id: int
    slug: str
    owner: str
    created_at: str
    # What the App was granted and subscribed to (its settings page); tests may change them.
    permissions: dict[str, str] = field(default_factory=lambda: dict(PERMISSIONS))
    events: list[str] = field(default_factory=lambda: list(EVENTS))

    @property
    def bot_login(self) -> str:
        return f"{self.slug}[bot]"


# A repository's URL templates, as GitHub lists them, below its API URL.
REPO_URLS = {
    "forks_url": "/forks",
    "keys_url": "/keys{/key_id}",
    "collaborators_url": "/collaborators{/collaborator}",
    "teams_url": "/teams",
    "hooks_url": "/hooks",
    "issue_events_url": "/issues/events{/number}",
    "events_url": "/events",
    "assignees_url": "/assignees{/user}",
    "branches_url": "/branches{/branch}",
    "tags_url": "/tags",
    "blobs_url": "/git/blobs{/sha}",
    "git_tags_url": "/git/tags{/sha}",
    "git_refs_url": "/git/refs{/sha}",
    "trees_url": "/git/trees{/sha}",
    "statuses_url": "/statuses/{sha}",
    "languages_url": "/languages",
    "stargazers_url": "/stargazers",
    "contributors_url": "/contributors",
    "subscribers_url": "/subscribers",
    "subscription_url": "/subscription",
    "commits_url": "/commits{/sha}",
    "git_commits_url": "/git/commits{/sha}",
    "comments_url": "/comments{/number}",
    "issue_comment_url": "/issues/comments{/number}",
    "contents_url": "/contents/{+path}",
    "compare_url": "/compare/{base}...{head}",
    "merges_url": "/merges",
    "archive_url": "/{archive_format}{/ref}",
    "downloads_url": "/downloads",
    "issues_url": "/issues{/number}",
    "pulls_url": "/pulls{/number}",
    "milestones_url": "/milestones{/number}",
    "notifications_url": "/notifications{?since,all,participating}",
    "labels_url": "/labels{/name}",
    "releases_url": "/releases{/id}",
    "deployments_url": "/deployments",
}


class Shapes:
    def __init__(
        self,
        world: World,
        app: AppInfo,
        base_url: Callable[[], str],
        *,
        api_url: Callable[[], str] | None = None,
    ) -> None:
        self.world = world
        self.app_info = app
        self._base = base_url
        self._api = api_url or base_url  # Enterprise Server: {base}/api/v3

    # ---------------------------------------------------------------- urls
    @property
    def api(self) -> str:
        return self._api()

    @property
    def web(self) -> str:
        return self._base()

    def repo_api(self, repo: Repo) -> str:
        return f"{self.api}/repos/{repo.full_name}"

    def repo_web(self, repo: Repo) -> str:
        return f"{self.web}/{repo.full_name}"

    # ---------------------------------------------------------------- people and apps
    def user(self, who: User | str) -> JSON:
        user = who if isinstance(who, User) else self.world.user(who)
        login, api = user.login, f"{self.api}/users/{user.login}"
        profile = f"apps/{login.removesuffix('[bot]')}" if user.type == "Bot" else login
        return {
            "login": login,
            "id": user.id,
            "node_id": user.node_id,
            "avatar_url": f"{self.web}/avatars/u/{user.id}?v=4",
            "gravatar_id": "",
            "url": api,
            "html_url": f"{self.web}/{profile}",
            "followers_url": f"{api}/followers",
            "following_url": f"{api}/following{{/other_user}}",
            "gists_url": f"{api}/gists{{/gist_id}}",
            "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{api}/subscriptions",
            "organizations_url": f"{api}/orgs",
            "repos_url": f"{api}/repos",
            "events_url": f"{api}/events{{/privacy}}",
            "received_events_url": f"{api}/received_events",
            "type": user.type,
            "user_view_type": "public",
            "site_admin": False,
        }

    def app_id(self, slug: str = "") -> int:
        """The id of the fake's own App (``""`` or its slug), or a stable one for another App."""
        if not slug or slug == self.app_info.slug:
            return self.app_info.id
        return int(hashlib.sha1(slug.encode(), usedforsecurity=False).hexdigest()[:6], 16)

    def app(self, slug: str = "") -> JSON:
        """The fake's own App, or (``slug``) another App installed on the repository (CI, a
        reviewer bot) with the same shape."""
        info = self.app_info
        if slug and slug != info.slug:
            info = AppInfo(self.app_id(slug), slug, f"{slug}-developer", info.created_at)
        return {
            "id": info.id,
            "slug": info.slug,
            "node_id": node_id("A", info.id),
            "client_id": f"Iv1.fake{info.id:08d}",
            "owner": self.user(self.world.user(info.owner, type="Organization")),
            "name": info.slug,
            "description": "A GitHub App served by the offline fake.",
            "external_url": f"{self.web}/apps/{info.slug}",
            "html_url": f"{self.web}/apps/{info.slug}",
            "created_at": info.created_at,
            "updated_at": info.created_at,
            "permissions": dict(info.permissions),
            "events": list(info.events),
        }

    def installation(self, inst: Installation) -> JSON:
        account = self.world.user(inst.account)
        # GitHub's description of GET /app/installations types ``account`` as allOf(simple-user,
        # enterprise); the enterprise fields are added so the answer fits either reading.
        enterprise = {
            "name": account.name or account.login,
            "slug": account.login.lower(),
            "description": None,
            "website_url": None,
            "created_at": inst.created_at,
            "updated_at": inst.created_at,
        }
        return {
            "id": inst.id,
            "account": {**self.user(account), **enterprise},
            "repository_selection": "all",
            "access_tokens_url": f"{self.api}/app/installations/{inst.id}/access_tokens",
            "repositories_url": f"{self.api}/installation/repositories",
            "html_url": f"{self.web}/settings/installations/{inst.id}",
            "app_id": self.app_info.id,
            "app_slug": self.app_info.slug,
            "client_id": f"Iv1.fake{self.app_info.id:08d}",
            "target_id": account.id,
            "target_type": account.type if account.type != "Bot" else "User",
            "permissions": dict(self.app_info.permissions),
            "events": list(self.app_info.events),
            "created_at": inst.created_at,
            "updated_at": inst.created_at,
            "single_file_name": None,
            "has_multiple_single_files": False,
            "single_file_paths": [],
            "suspended_by": None,
            "suspended_at": None,
        }

    def installation_lite(self, inst: Installation) -> JSON:
        return {"id": inst.id, "node_id": inst.node_id}

    def team(self, slug: str, repo: Repo) -> JSON:
        org_api = f"{self.api}/orgs/{repo.owner}"
        team_id = zlib.crc32(f"team:{repo.owner.lower()}/{slug.lower()}".encode()) % 10_000_000
        return {
            "id": team_id,
            "node_id": node_id("T", team_id),
            "name": slug,
            "slug": slug,
            "description": None,
            "privacy": "closed",
            "notification_setting": "notifications_enabled",
            "permission": "pull",
            "url": f"{org_api}/teams/{slug}",
            "html_url": f"{self.web}/orgs/{repo.owner}/teams/{slug}",
            "members_url": f"{org_api}/teams/{slug}/members{{/member}}",
            "repositories_url": f"{org_api}/teams/{slug}/repos",
            "parent": None,
            "type": "organization",
        }

    # ---------------------------------------------------------------- repositories
    def repo(self, repo: Repo) -> JSON:
        api, web = self.repo_api(repo), self.repo_web(repo)
        host = web.split("://", 1)[-1].split("/", 1)[0]
        open_issues = sum(1 for p in self.world.pulls_of(repo) if p.state == "open")
        return {
            "id": repo.id,
            "node_id": repo.node_id,
            "name": repo.name,
            "full_name": repo.full_name,
            "private": repo.private,
            "owner": self.user(repo.owner),
            "html_url": web,
            "description": None,
            "fork": False,
            "url": api,
            **{key: f"{api}{path}" for key, path in REPO_URLS.items()},
            "created_at": repo.created_at,
            "updated_at": repo.pushed_at or repo.created_at,
            "pushed_at": repo.pushed_at or repo.created_at,
            "git_url": f"git://{host}/{repo.full_name}.git",
            "ssh_url": f"git@{host}:{repo.full_name}.git",
            "clone_url": f"{web}.git",
            "svn_url": web,
            "homepage": None,
            "size": 0,
            "stargazers_count": 0,
            "watchers_count": 0,
            "language": None,
            "has_issues": True,
            "has_projects": True,
            "has_downloads": True,
            "has_wiki": True,
            "has_pages": False,
            "has_discussions": False,
            "forks_count": 0,
            "mirror_url": None,
            "archived": False,
            "disabled": False,
            "open_issues_count": open_issues,
            "license": None,
            "allow_forking": True,
            "is_template": False,
            "web_commit_signoff_required": False,
            "topics": [],
            "visibility": "private" if repo.private else "public",
            "forks": 0,
            "open_issues": open_issues,
            "watchers": 0,
            "default_branch": repo.default_branch,
            "custom_properties": {},
            "network_count": 0,
            "subscribers_count": 0,
        }

    # ---------------------------------------------------------------- pull requests
    def pull_files(self, pull: Pull) -> list[FileDiff]:
        repo = self.world.repo(pull.repo)
        base_sha = self.base_sha(pull)
        merge_base = self.world.merge_base(repo, base_sha, pull.head_sha)
        old = self.world.commit(repo, merge_base).files
        new = self.world.commit(repo, pull.head_sha).files
        return diff_trees(old, new)

    def base_sha(self, pull: Pull) -> str:
        repo = self.world.repo(pull.repo)
        return repo.branches.get(pull.base_ref) or pull.head_sha

    def commit_count(self, pull: Pull) -> int:
        repo = self.world.repo(pull.repo)
        base_line = set(self.world.ancestors(repo, self.base_sha(pull)))
        return sum(1 for sha in self.world.ancestors(repo, pull.head_sha) if sha not in base_line)

    def _branch(self, pull: Pull, ref: str, sha: str) -> JSON:
        repo = self.world.repo(pull.repo)
        return {
            "label": f"{repo.owner}:{ref}",
            "ref": ref,
            "sha": sha,
            "user": self.user(repo.owner),
            "repo": self.repo(repo),
        }

    def pull_links(self, pull: Pull) -> JSON:
        repo = self.world.repo(pull.repo)
        api = self.repo_api(repo)
        return {
            "self": {"href": f"{api}/pulls/{pull.number}"},
            "html": {"href": f"{self.repo_web(repo)}/pull/{pull.number}"},
            "issue": {"href": f"{api}/issues/{pull.number}"},
            "comments": {"href": f"{api}/issues/{pull.number}/comments"},
            "review_comments": {"href": f"{api}/pulls/{pull.number}/comments"},
            "review_comment": {"href": f"{api}/pulls/comments{{/number}}"},
            "commits": {"href": f"{api}/pulls/{pull.number}/commits"},
            "statuses": {"href": f"{api}/statuses/{pull.head_sha}"},
        }

    def label(self, repo: Repo, name: str) -> JSON:
        label_id = zlib.crc32(f"label:{repo.key}:{name}".encode())
        return {
            "id": label_id,
            "node_id": node_id("LA", label_id),
            "url": f"{self.repo_api(repo)}/labels/{name}",
            "name": name,
            "color": "ededed",
            "default": False,
            "description": None,
        }

    def pull(self, pull: Pull, *, simple: bool = False) -> JSON:
        """A pull request; ``simple`` leaves out what GitHub computes only for the single-PR view."""
        repo = self.world.repo(pull.repo)
        api, web = self.repo_api(repo), self.repo_web(repo)
        data: JSON = {
            "url": f"{api}/pulls/{pull.number}",
            "id": pull.id,
            "node_id": pull.node_id,
            "html_url": f"{web}/pull/{pull.number}",
            "diff_url": f"{web}/pull/{pull.number}.diff",
            "patch_url": f"{web}/pull/{pull.number}.patch",
            "issue_url": f"{api}/issues/{pull.number}",
            "number": pull.number,
            "state": pull.state,
            "locked": False,
            "title": pull.title,
            "user": self.user(pull.author),
            "body": pull.body,
            "created_at": pull.created_at,
            "updated_at": pull.updated_at,
            "closed_at": pull.closed_at,
            "merged_at": pull.merged_at,
            "merge_commit_sha": None,
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [self.user(login) for login in pull.requested_reviewers],
            "requested_teams": [self.team(slug, repo) for slug in pull.requested_teams],
            "labels": [self.label(repo, name) for name in pull.labels],
            "milestone": None,
            "draft": pull.draft,
            "commits_url": f"{api}/pulls/{pull.number}/commits",
            "review_comments_url": f"{api}/pulls/{pull.number}/comments",
            "review_comment_url": f"{api}/pulls/comments{{/number}}",
            "comments_url": f"{api}/issues/{pull.number}/comments",
            "statuses_url": f"{api}/statuses/{pull.head_sha}",
            "head": self._branch(pull, pull.head_ref, pull.head_sha),
            "base": self._branch(pull, pull.base_ref, self.base_sha(pull)),
            "_links": self.pull_links(pull),
            "author_association": pull.author_association,
            "auto_merge": None,
            "active_lock_reason": None,
        }
        if simple:
            return data
        files = self.pull_files(pull)
        data.update(
            {
                "merged": pull.merged,
                **self.mergeability(pull),
                "merged_by": None,
                "comments": len(self.world.issue_comments_of(repo, pull.number)),
                "review_comments": len(self.world.review_comments_of(pull)),
                "maintainer_can_modify": False,
                "commits": self.commit_count(pull),
                "additions": sum(f.additions for f in files),
                "deletions": sum(f.deletions for f in files),
                "changed_files": len(files),
            }
        )
        return data

    def mergeability(self, pull: Pull) -> JSON:
        """``mergeable``, ``rebaseable``, ``mergeable_state``: null until GitHub computed them
        (``mergeable_pending``; the read starts the computation), a conflict as ``dirty``, a base
        that moved on as ``behind``."""
        if pull.mergeable_pending:
            pull.mergeable_pending = False
            return {"mergeable": None, "rebaseable": None, "mergeable_state": "unknown"}
        if pull.conflicts:
            return {"mergeable": False, "rebaseable": False, "mergeable_state": "dirty"}
        repo = self.world.repo(pull.repo)
        base_tip = repo.branches.get(pull.base_ref)
        behind = base_tip is not None and base_tip not in self.world.ancestors(repo, pull.head_sha)
        return {"mergeable": True, "rebaseable": True, "mergeable_state": "behind" if behind else "clean"}

    def pull_minimal(self, pull: Pull) -> JSON:
        repo = self.world.repo(pull.repo)
        mini_repo = {"id": repo.id, "url": self.repo_api(repo), "name": repo.name}
        return {
            "id": pull.id,
            "number": pull.number,
            "url": f"{self.repo_api(repo)}/pulls/{pull.number}",
            "head": {"ref": pull.head_ref, "sha": pull.head_sha, "repo": mini_repo},
            "base": {"ref": pull.base_ref, "sha": self.base_sha(pull), "repo": dict(mini_repo)},
        }

    def diff_entry(self, pull: Pull, entry: FileDiff) -> JSON:
        return self.file_entry(self.world.repo(pull.repo), pull.head_sha, entry)

    def file_entry(self, repo: Repo, head_sha: str, entry: FileDiff) -> JSON:
        """One changed file, as a pull request's files and a comparison list it."""
        web, api = self.repo_web(repo), self.repo_api(repo)
        data: JSON = {
            "sha": entry.sha,
            "filename": entry.filename,
            "status": entry.status,
            "additions": entry.additions,
            "deletions": entry.deletions,
            "changes": entry.changes,
            "blob_url": f"{web}/blob/{head_sha}/{entry.filename}",
            "raw_url": f"{web}/raw/{head_sha}/{entry.filename}",
            "contents_url": f"{api}/contents/{entry.filename}?ref={head_sha}",
        }
        if entry.patch is not None:
            data["patch"] = entry.patch
        if entry.previous_filename is not None:
            data["previous_filename"] = entry.previous_filename
        return data

    def commit(self, repo: Repo, sha: str) -> JSON:
        """A commit as the REST API lists it (``compare``'s ``commits``, ``base_commit``)."""
        found = self.world.commit(repo, sha)
        api, web = self.repo_api(repo), self.repo_web(repo)
        person = {
            "name": found.author,
            "email": f"{found.author}@users.noreply.example",
            "date": found.timestamp,
        }
        return {
            "url": f"{api}/commits/{sha}",
            "sha": sha,
            "node_id": node_id("C", sha),
            "html_url": f"{web}/commit/{sha}",
            "comments_url": f"{api}/commits/{sha}/comments",
            "commit": {
                "url": f"{api}/git/commits/{sha}",
                "author": person,
                "committer": dict(person),
                "message": found.message,
                "comment_count": 0,
                "tree": {"sha": blob_sha(f"tree:{sha}:"), "url": f"{api}/git/trees/{sha}"},
            },
            "author": None,
            "committer": None,
            "parents": [
                {
                    "sha": found.parent,
                    "url": f"{api}/commits/{found.parent}",
                    "html_url": f"{web}/commit/{found.parent}",
                }
            ]
            if found.parent
            else [],
        }

    def comparison(self, repo: Repo, base_sha: str, head_sha: str) -> JSON:
        """``GET /compare/{base}...{head}``: where ``head`` stands to ``base`` (identical, ahead,
        behind or diverged), the commits since their merge base, and the files changed from the
        merge base to ``head`` (three dots: what ``head`` added)."""
        base_line = self.world.ancestors(repo, base_sha)
        head_line = self.world.ancestors(repo, head_sha)
        merge_base = self.world.merge_base(repo, base_sha, head_sha)
        ahead = [sha for sha in head_line if sha not in base_line]
        behind = [sha for sha in base_line if sha not in head_line]
        status = (
            "identical"
            if base_sha == head_sha
            else "ahead"
            if not behind
            else "behind"
            if not ahead
            else "diverged"
        )
        api, web = self.repo_api(repo), self.repo_web(repo)
        old, new = self.world.commit(repo, merge_base).files, self.world.commit(repo, head_sha).files
        files = [self.file_entry(repo, head_sha, entry) for entry in diff_trees(old, new)]
        basehead = f"{base_sha}...{head_sha}"
        return {
            "url": f"{api}/compare/{basehead}",
            "html_url": f"{web}/compare/{basehead}",
            "permalink_url": f"{web}/compare/{basehead}",
            "diff_url": f"{web}/compare/{basehead}.diff",
            "patch_url": f"{web}/compare/{basehead}.patch",
            "base_commit": self.commit(repo, base_sha),
            "merge_base_commit": self.commit(repo, merge_base),
            "status": status,
            "ahead_by": len(ahead),
            "behind_by": len(behind),
            "total_commits": len(ahead),
            "commits": [self.commit(repo, sha) for sha in reversed(ahead[:250])],
            "files": files[:300],
        }

    # ---------------------------------------------------------------- issues
    def issue(self, pull: Pull) -> JSON:
        """The issue side of a pull request, as ``issue_comment`` payloads carry it."""
        repo = self.world.repo(pull.repo)
        api, web = self.repo_api(repo), self.repo_web(repo)
        issue_api = f"{api}/issues/{pull.number}"
        return {
            "url": issue_api,
            "repository_url": api,
            "labels_url": f"{issue_api}/labels{{/name}}",
            "comments_url": f"{issue_api}/comments",
            "events_url": f"{issue_api}/events",
            "html_url": f"{web}/pull/{pull.number}",
            "id": pull.issue_id,
            "node_id": pull.issue_node_id,
            "number": pull.number,
            "title": pull.title,
            "user": self.user(pull.author),
            "labels": [self.label(repo, name) for name in pull.labels],
            "state": pull.state,
            "locked": False,
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "comments": len(self.world.issue_comments_of(repo, pull.number)),
            "created_at": pull.created_at,
            "updated_at": pull.updated_at,
            "closed_at": None,
            "author_association": pull.author_association,
            "active_lock_reason": None,
            "draft": pull.draft,
            "pull_request": {
                "url": f"{api}/pulls/{pull.number}",
                "html_url": f"{web}/pull/{pull.number}",
                "diff_url": f"{web}/pull/{pull.number}.diff",
                "patch_url": f"{web}/pull/{pull.number}.patch",
                "merged_at": None,
            },
            "body": pull.body,
            "reactions": self.reaction_rollup(f"{issue_api}/reactions", ("issue", pull.number), repo),
            "timeline_url": f"{issue_api}/timeline",
            "performed_via_github_app": None,
            "state_reason": None,
        }

    def reaction_rollup(self, url: str, subject: tuple[str, int], repo: Repo) -> JSON:
        mine = [r for r in self.world.reactions if r.subject == subject and r.repo == repo.key]
        rollup: JSON = {"url": url, "total_count": len(mine)}
        for content in REACTIONS:
            rollup[content] = sum(1 for r in mine if r.content == content)
        return rollup

    def issue_comment(self, comment: IssueComment) -> JSON:
        repo = self.world.repo(comment.repo)
        api = self.repo_api(repo)
        url = f"{api}/issues/comments/{comment.id}"
        return {
            "id": comment.id,
            "node_id": comment.node_id,
            "url": url,
            "html_url": f"{self.repo_web(repo)}/pull/{comment.number}#issuecomment-{comment.id}",
            "body": comment.body,
            "user": self.user(comment.user),
            "created_at": comment.created_at,
            "updated_at": comment.updated_at,
            "issue_url": f"{api}/issues/{comment.number}",
            "author_association": comment.author_association,
            "performed_via_github_app": self.app() if comment.via_app else None,
            "reactions": self.reaction_rollup(f"{url}/reactions", ("issue_comment", comment.id), repo),
        }

    def reaction(self, reaction: Reaction) -> JSON:
        return {
            "id": reaction.id,
            "node_id": reaction.node_id,
            "user": self.user(reaction.user),
            "content": reaction.content,
            "created_at": reaction.created_at,
        }

    # ---------------------------------------------------------------- reviews
    def review(self, review: Review, *, webhook: bool = False) -> JSON:
        repo = self.world.repo(review.repo)
        html = f"{self.repo_web(repo)}/pull/{review.number}#pullrequestreview-{review.id}"
        pull_url = f"{self.repo_api(repo)}/pulls/{review.number}"
        data: JSON = {
            "id": review.id,
            "node_id": review.node_id,
            "user": self.user(review.user),
            "body": (review.body or None) if webhook else review.body,
            "state": review.state.lower() if webhook else review.state,
            "html_url": html,
            "pull_request_url": pull_url,
            "author_association": review.author_association,
            "_links": {"html": {"href": html}, "pull_request": {"href": pull_url}},
            "commit_id": review.commit_id,
        }
        if review.submitted_at is not None or webhook:
            data["submitted_at"] = review.submitted_at
        return data

    def review_comment(self, comment: ReviewComment) -> JSON:
        repo = self.world.repo(comment.repo)
        api = self.repo_api(repo)
        url = f"{api}/pulls/comments/{comment.id}"
        html = f"{self.repo_web(repo)}/pull/{comment.number}#discussion_r{comment.id}"
        pull_url = f"{api}/pulls/{comment.number}"
        data: JSON = {
            "url": url,
            "pull_request_review_id": comment.review_id,
            "id": comment.id,
            "node_id": comment.node_id,
            "diff_hunk": comment.diff_hunk,
            "path": comment.path,
            "position": comment.position,
            "original_position": comment.original_position,
            "commit_id": comment.commit_id,
            "original_commit_id": comment.original_commit_id,
            "user": self.user(comment.user),
            "body": comment.body,
            "created_at": comment.created_at,
            "updated_at": comment.updated_at,
            "html_url": html,
            "pull_request_url": pull_url,
            "author_association": comment.author_association,
            "_links": {"self": {"href": url}, "html": {"href": html}, "pull_request": {"href": pull_url}},
            "reactions": self.reaction_rollup(f"{url}/reactions", ("review_comment", comment.id), repo),
            "start_line": comment.start_line,
            "original_start_line": comment.original_start_line,
            "start_side": comment.start_side,
            "line": comment.line,
            "original_line": comment.original_line,
            "side": comment.side,
            "subject_type": comment.subject_type,
        }
        if comment.in_reply_to_id is not None:
            data["in_reply_to_id"] = comment.in_reply_to_id
        return data

    # ---------------------------------------------------------------- checks
    def check_suite(self, run: CheckRun) -> JSON:
        repo = self.world.repo(run.repo)
        runs = [r for r in self.world.check_runs.values() if r.check_suite_id == run.check_suite_id]
        done = all(r.status == "completed" for r in runs)
        conclusions = [r.conclusion for r in runs]
        conclusion = None
        if done:
            # The highest priority conclusion of the suite's runs, as GitHub reports it.
            ranked = [c for c in SUITE_PRIORITY if c in conclusions]
            conclusion = ranked[0] if ranked else None
        branch = next((name for name, sha in repo.branches.items() if sha == run.head_sha), None)
        commit = repo.commits.get(run.head_sha)
        return {
            "id": run.check_suite_id,
            "node_id": node_id("CS", run.check_suite_id),
            "head_branch": branch,
            "head_sha": run.head_sha,
            "status": "completed" if done else "in_progress",
            "conclusion": conclusion,
            "url": f"{self.repo_api(repo)}/check-suites/{run.check_suite_id}",
            "before": commit.parent if commit and commit.parent else "0" * 40,
            "after": run.head_sha,
            "pull_requests": self.check_pulls(run),
            "app": self.app(run.app),
            "created_at": run.started_at,
            "updated_at": run.completed_at or run.started_at,
        }

    def check_pulls(self, run: CheckRun) -> list[JSON]:
        repo = self.world.repo(run.repo)
        return [
            self.pull_minimal(p)
            for p in self.world.pulls_of(repo)
            if p.state == "open" and p.head_sha == run.head_sha
        ]

    def check_run(self, run: CheckRun, *, webhook: bool = False) -> JSON:
        repo = self.world.repo(run.repo)
        url = f"{self.repo_api(repo)}/check-runs/{run.id}"
        html = f"{self.repo_web(repo)}/runs/{run.id}"
        return {
            "id": run.id,
            "head_sha": run.head_sha,
            "node_id": run.node_id,
            "external_id": run.external_id,
            "url": url,
            "html_url": html,
            "details_url": run.details_url or html,
            "status": run.status,
            "conclusion": run.conclusion,
            "started_at": run.started_at,
            "completed_at": run.completed_at,
            "output": {
                "title": run.title,
                "summary": run.summary,
                "text": run.text,
                "annotations_count": len(run.annotations),
                "annotations_url": f"{url}/annotations",
            },
            "name": run.name,
            "check_suite": self.check_suite(run) if webhook else {"id": run.check_suite_id},
            "app": self.app(run.app),
            "pull_requests": self.check_pulls(run),
        }

    def annotation(self, run: CheckRun, item: dict[str, object]) -> JSON:
        repo = self.world.repo(run.repo)
        path = str(item.get("path", ""))
        return {
            "path": path,
            "start_line": item.get("start_line"),
            "end_line": item.get("end_line"),
            "start_column": item.get("start_column"),
            "end_column": item.get("end_column"),
            "annotation_level": item.get("annotation_level"),
            "title": item.get("title"),
            "message": item.get("message"),
            "raw_details": item.get("raw_details"),
            "blob_href": f"{self.repo_web(repo)}/blob/{run.head_sha}/{path}",
        }

    # ---------------------------------------------------------------- webhook envelopes
    def envelope(self, action: str | None, repo: Repo, sender: str, **fields: Any) -> JSON:
        """``action``, the event's own fields, ``repository``, ``sender`` and ``installation``."""
        payload: JSON = {} if action is None else {"action": action}
        payload.update(fields)
        payload["repository"] = self.repo(repo)
        payload["sender"] = self.user(sender)
        inst = self.world.installations.get(repo.installation_id)
        if inst is not None:
            payload["installation"] = self.installation_lite(inst)
        return payload

    def now(self) -> str:
        return self.world.iso()
