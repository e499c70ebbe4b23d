"""What a write does to the world, with GitHub's rules, and which webhooks it causes.

REST handlers, GraphQL mutations and the test helpers that act as humans all go through these
methods, so a review submitted by the bot over HTTP and one submitted by a "human" from a test
follow the same rules and emit the same webhooks. Each method takes an ``emit(event, payload)``
callback; the caller decides when those deliveries go out (after the HTTP answer, for requests).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .diff import FileDiff, diff_trees
from .errors import ApiError, not_found, unprocessable, validation_failed
from .payloads import REACTIONS, Shapes
from .state import (
    CheckRun,
    Commit,
    IssueComment,
    Pull,
    Reaction,
    Repo,
    Review,
    ReviewComment,
    Thread,
    World,
    node_id,
)

Emit = Callable[[str, dict[str, Any]], None]

REVIEW_STATES = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}
MAX_ANNOTATIONS = 50
CHECK_STATUSES = ("queued", "in_progress", "completed", "waiting", "requested", "pending")
CHECK_CONCLUSIONS = (
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "success",
    "skipped",
    "stale",
    "timed_out",
)


class Actions:
    def __init__(self, world: World, shapes: Shapes) -> None:
        self.world = world
        self.shapes = shapes

    # ---------------------------------------------------------------- people
    def association(self, repo: Repo, login: str) -> str:
        explicit = repo.associations.get(login.lower())
        if explicit:
            return explicit
        if login.lower() == repo.owner.lower():
            return "OWNER"
        if login.lower() == self.shapes.app_info.bot_login.lower():
            return "NONE"
        return "CONTRIBUTOR"

    # ---------------------------------------------------------------- commits and pushes
    def add_commit(
        self,
        repo: Repo,
        files: Mapping[str, str | None],
        *,
        parent: str | None,
        message: str,
        author: str,
        sha: str | None = None,
    ) -> str:
        """A commit of ``files`` (None: deleted) over ``parent``; ``sha`` keeps a real commit's id."""
        tree: dict[str, str] = dict(self.world.commit(repo, parent).files) if parent else {}
        for path, content in files.items():
            if content is None:
                tree.pop(path, None)
            else:
                tree[path] = content
        sha = sha or self.world.new_sha(f"{repo.key}:{parent}:{message}:{sorted(tree.items())!r}")
        repo.commits[sha] = Commit(sha, tree, parent, message or "A commit", author, self.world.iso())
        self.world.user(author)
        return sha

    def push(
        self, repo: Repo, branch: str, files: Mapping[str, str | None], *, message: str, emit: Emit
    ) -> str:
        tip = repo.branches.get(branch) or repo.branches.get(repo.default_branch)
        pushers = self._open_pulls_from(repo, branch)
        author = pushers[0].author if pushers else repo.owner
        sha = self.add_commit(repo, files, parent=tip, message=message or f"Update {branch}", author=author)
        self.move_branch(repo, branch, sha, emit=emit)
        return sha

    def move_branch(self, repo: Repo, branch: str, sha: str, *, emit: Emit) -> None:
        """``branch`` now points at the existing commit ``sha`` (a push, or a force-push when the
        old tip is not its ancestor): every open pull request with that head follows it."""
        self.world.commit(repo, sha)
        repo.branches[branch] = sha
        repo.pushed_at = self.world.iso()
        for pull in self._open_pulls_from(repo, branch):
            before = pull.head_sha
            pull.head_sha = sha
            pull.updated_at = self.world.iso()
            self._carry_comments(repo, pull, sha)
            emit(
                "pull_request",
                self.shapes.envelope(
                    "synchronize",
                    repo,
                    pull.author,
                    number=pull.number,
                    before=before,
                    after=sha,
                    pull_request=self.shapes.pull(pull),
                ),
            )

    def _open_pulls_from(self, repo: Repo, branch: str) -> list[Pull]:
        return [p for p in self.world.pulls_of(repo) if p.head_ref == branch and p.state == "open"]

    def _carry_comments(self, repo: Repo, pull: Pull, new_sha: str) -> None:
        """Move comments whose file did not change to the new head; the others become outdated."""
        new_files = self.world.commit(repo, new_sha).files
        for comment in self.world.review_comments_of(pull):
            old = repo.commits.get(comment.commit_id)
            if old is not None and old.files.get(comment.path) == new_files.get(comment.path):
                comment.commit_id = new_sha
            else:
                comment.line = None
                comment.start_line = None
                comment.position = None

    # ---------------------------------------------------------------- diffs
    def files_at(self, pull: Pull, commit_id: str) -> list[FileDiff]:
        repo = self.world.repo(pull.repo)
        if commit_id == pull.head_sha:
            return self.shapes.pull_files(pull)
        base = self.world.merge_base(repo, self.shapes.base_sha(pull), commit_id)
        return diff_trees(self.world.commit(repo, base).files, self.world.commit(repo, commit_id).files)

    # ---------------------------------------------------------------- reviews
    def create_review(
        self,
        repo: Repo,
        pull: Pull,
        actor: str,
        *,
        body: str | None,
        event: str | None,
        comments: list[dict[str, Any]] | None,
        commit_id: str | None,
        emit: Emit,
    ) -> Review:
        comments = comments or []
        body = body or ""
        if event is not None and event not in REVIEW_STATES:
            raise unprocessable(f"Unexpected event {event!r}: must be APPROVE, REQUEST_CHANGES or COMMENT")
        is_author = actor.lower() == pull.author.lower()
        if event == "APPROVE" and is_author:
            raise unprocessable("Can not approve your own pull request")
        if event == "REQUEST_CHANGES" and is_author:
            raise unprocessable("Can not request changes on your own pull request")
        if event in ("REQUEST_CHANGES", "COMMENT") and not body.strip() and not comments:
            raise unprocessable(f"Body is required when the event is {event}")
        if event is None and any(
            r.user.lower() == actor.lower() and r.state == "PENDING" for r in self.world.reviews_of(pull)
        ):
            raise unprocessable("User can only have one pending review per pull request")
        commit = commit_id or pull.head_sha
        if commit not in repo.commits:
            raise unprocessable("Commit could not be resolved")
        placed = self._place_comments(pull, commit, comments)

        state = REVIEW_STATES[event] if event else "PENDING"
        now = self.world.iso()
        review_id = self.world.new_id()
        review = Review(
            id=review_id,
            node_id=node_id("PRR", review_id),
            repo=repo.key,
            number=pull.number,
            user=self.world.user(actor).login,
            body=body,
            state=state,
            commit_id=commit,
            submitted_at=None if state == "PENDING" else now,
            author_association=self.association(repo, actor),
        )
        self.world.reviews[review.id] = review
        created: list[ReviewComment] = []
        for spec, place in zip(comments, placed, strict=True):
            created.append(self._new_comment(repo, pull, review, spec, place, commit))
        if state == "PENDING":
            return review
        pull.requested_reviewers = [r for r in pull.requested_reviewers if r.lower() != actor.lower()]
        emit(
            "pull_request_review",
            self.shapes.envelope(
                "submitted",
                repo,
                actor,
                review=self.shapes.review(review, webhook=True),
                pull_request=self.shapes.pull(pull, simple=True),
            ),
        )
        for comment in created:
            self._emit_review_comment(repo, pull, comment, actor, emit)
        return review

    def _place_comments(
        self, pull: Pull, commit: str, comments: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Where each inline comment lands in the diff; any that cannot land rejects them all."""
        files = {f.filename: f for f in self.files_at(pull, commit)}
        placed: list[dict[str, Any]] = []
        errors: list[str] = []
        for spec in comments:
            entry = files.get(str(spec.get("path")))
            if entry is None:
                errors.append("Path could not be resolved")
                placed.append({})
                continue
            if spec.get("subject_type") == "file":
                placed.append(
                    {"line": None, "side": "RIGHT", "position": 1, "diff_hunk": "", "subject": "file"}
                )
                continue
            side = str(spec.get("side") or "RIGHT").upper()
            line = spec.get("line")
            if line is None and isinstance(spec.get("position"), int):
                found = entry.line_at(int(spec["position"]))
                if found is None:
                    errors.append("Position could not be resolved")
                    placed.append({})
                    continue
                side, line = found
            if not isinstance(line, int) or side not in ("LEFT", "RIGHT"):
                errors.append("Line could not be resolved")
                placed.append({})
                continue
            where = entry.locate(side, line)
            if where is None:
                errors.append("Line could not be resolved")
                placed.append({})
                continue
            place: dict[str, Any] = {
                "line": line,
                "side": side,
                "position": where.position,
                "diff_hunk": where.diff_hunk,
                "subject": "line",
                "start_line": None,
                "start_side": None,
            }
            start_line = spec.get("start_line")
            if start_line is not None:
                start_side = str(spec.get("start_side") or side).upper()
                start = entry.locate(start_side, start_line) if isinstance(start_line, int) else None
                if start is None:
                    errors.append("Start line could not be resolved")
                elif start.hunk_index != where.hunk_index:
                    errors.append("start_line must be part of the same hunk as the line.")
                elif start.position >= where.position:
                    errors.append("start_line must precede the end line.")
                else:
                    place["start_line"], place["start_side"] = start_line, start_side
            placed.append(place)
        if errors:
            raise unprocessable(*errors)
        return placed

    def _new_comment(
        self,
        repo: Repo,
        pull: Pull,
        review: Review,
        spec: dict[str, Any],
        place: dict[str, Any],
        commit: str,
        *,
        reply_to: ReviewComment | None = None,
    ) -> ReviewComment:
        comment_id = self.world.new_id()
        now = self.world.iso()
        if reply_to is None:
            thread = Thread(node_id=node_id("PRRT", comment_id), repo=repo.key, number=pull.number)
            self.world.threads[thread.node_id] = thread
        else:
            thread = self.world.threads[reply_to.thread_id]
        comment = ReviewComment(
            id=comment_id,
            node_id=node_id("PRRC", comment_id),
            repo=repo.key,
            number=pull.number,
            review_id=review.id,
            thread_id=thread.node_id,
            user=review.user,
            body=str(spec.get("body") or ""),
            path=str(spec.get("path")),
            line=place["line"],
            original_line=place["line"],
            side=place["side"],
            start_line=place.get("start_line"),
            original_start_line=place.get("start_line"),
            start_side=place.get("start_side"),
            commit_id=commit,
            original_commit_id=commit,
            diff_hunk=place["diff_hunk"],
            position=place["position"],
            original_position=place["position"],
            in_reply_to_id=reply_to.id if reply_to else None,
            created_at=now,
            updated_at=now,
            author_association=review.author_association,
            subject_type=place["subject"],
        )
        self.world.review_comments[comment.id] = comment
        review.comment_ids.append(comment.id)
        thread.comment_ids.append(comment.id)
        return comment

    def _emit_review_comment(
        self, repo: Repo, pull: Pull, comment: ReviewComment, actor: str, emit: Emit
    ) -> None:
        emit(
            "pull_request_review_comment",
            self.shapes.envelope(
                "created",
                repo,
                actor,
                comment=self.shapes.review_comment(comment),
                pull_request=self.shapes.pull(pull, simple=True),
            ),
        )

    def visible_review(self, review: Review, viewer: str | None) -> bool:
        return review.state != "PENDING" or (viewer is not None and review.user.lower() == viewer.lower())

    def visible_comment(self, comment: ReviewComment, viewer: str | None) -> bool:
        review = self.world.reviews.get(comment.review_id)
        return review is None or self.visible_review(review, viewer)

    def reply(
        self, repo: Repo, pull: Pull, comment_id: int, actor: str, body: str, emit: Emit
    ) -> ReviewComment:
        target = self.world.review_comments.get(comment_id)
        if target is None or target.repo != repo.key or target.number != pull.number:
            raise not_found()
        if not body:
            raise validation_failed("PullRequestReviewComment", "body", "missing_field")
        root = self.world.review_comments[target.in_reply_to_id] if target.in_reply_to_id else target
        review_id = self.world.new_id()
        review = Review(
            id=review_id,
            node_id=node_id("PRR", review_id),
            repo=repo.key,
            number=pull.number,
            user=self.world.user(actor).login,
            body="",
            state="COMMENTED",
            commit_id=root.commit_id,
            submitted_at=self.world.iso(),
            author_association=self.association(repo, actor),
        )
        self.world.reviews[review.id] = review
        place = {
            "line": root.line,
            "side": root.side,
            "position": root.position if root.position is not None else root.original_position,
            "diff_hunk": root.diff_hunk,
            "subject": root.subject_type,
            "start_line": root.start_line,
            "start_side": root.start_side,
        }
        spec = {"path": root.path, "body": body}
        comment = self._new_comment(repo, pull, review, spec, place, root.commit_id, reply_to=root)
        comment.original_line = root.original_line
        comment.original_commit_id = root.original_commit_id
        self._emit_review_comment(repo, pull, comment, actor, emit)
        return comment

    def dismiss_review(
        self, repo: Repo, pull: Pull, review_id: int, actor: str, message: str, emit: Emit
    ) -> Review:
        review = self.world.reviews.get(review_id)
        if review is None or review.repo != repo.key or review.number != pull.number:
            raise not_found()
        if repo.dismissal_forbidden:
            raise ApiError(403, "You do not have permission to dismiss this review.")
        if review.state not in ("APPROVED", "CHANGES_REQUESTED"):
            raise unprocessable(
                f"Can not dismiss a {review.state.lower().replace('_', ' ')} pull request review"
            )
        review.state = "DISMISSED"
        review.dismissal_message = message
        emit(
            "pull_request_review",
            self.shapes.envelope(
                "dismissed",
                repo,
                actor,
                review=self.shapes.review(review, webhook=True),
                pull_request=self.shapes.pull(pull, simple=True),
            ),
        )
        return review

    def review_decision(self, pull: Pull) -> str | None:
        """GitHub's ``reviewDecision`` without branch protection: each reviewer's latest opinion.

        An opinion is an APPROVED or CHANGES_REQUESTED review; COMMENTED never changes it. A
        dismissed review still counts as the reviewer's latest opinion, but as none: dismissing
        an approval that followed a change request does not bring the change request back.
        """
        latest: dict[str, str] = {}
        for review in self.world.reviews_of(pull):
            if review.state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
                latest[review.user.lower()] = review.state
        states = set(latest.values())
        if "CHANGES_REQUESTED" in states:
            return "CHANGES_REQUESTED"
        if "APPROVED" in states:
            return "APPROVED"
        return None

    # ---------------------------------------------------------------- review requests
    def request_reviewers(
        self,
        repo: Repo,
        pull: Pull,
        actor: str,
        reviewers: list[str],
        teams: list[str],
        emit: Emit,
        *,
        create_users: bool = False,
    ) -> None:
        for login in reviewers:
            if login.lower() == pull.author.lower():
                raise unprocessable("Review cannot be requested from pull request author.")
            user = self.world.user(login) if create_users else self.world.known_user(login)
            if user is None or user.type != "User":
                raise unprocessable(
                    "Reviews may only be requested from collaborators. One or more of the users or teams "
                    f"you specified is not a collaborator of the {repo.full_name} repository."
                )
        for login in reviewers:
            user = self.world.user(login)
            if any(r.lower() == login.lower() for r in pull.requested_reviewers):
                continue
            pull.requested_reviewers.append(user.login)
            self._emit_request(
                emit, "review_requested", repo, actor, pull, requested_reviewer=self.shapes.user(user)
            )
        for slug in teams:
            if slug in pull.requested_teams:
                continue
            pull.requested_teams.append(slug)
            self._emit_request(
                emit, "review_requested", repo, actor, pull, requested_team=self.shapes.team(slug, repo)
            )

    def _emit_request(self, emit: Emit, action: str, repo: Repo, actor: str, pull: Pull, **who: Any) -> None:
        """``pull_request.review_requested`` / ``review_request_removed``: one delivery per reviewer
        or team, as GitHub sends them."""
        emit(
            "pull_request",
            self.shapes.envelope(
                action, repo, actor, number=pull.number, pull_request=self.shapes.pull(pull), **who
            ),
        )

    def remove_reviewers(
        self, repo: Repo, pull: Pull, actor: str, reviewers: list[str], teams: list[str], emit: Emit
    ) -> None:
        for login in reviewers:
            current = next((r for r in pull.requested_reviewers if r.lower() == login.lower()), None)
            if current is None:
                continue
            pull.requested_reviewers.remove(current)
            self._emit_request(
                emit,
                "review_request_removed",
                repo,
                actor,
                pull,
                requested_reviewer=self.shapes.user(current),
            )
        for slug in teams:
            if slug not in pull.requested_teams:
                continue
            pull.requested_teams.remove(slug)
            self._emit_request(
                emit, "review_request_removed", repo, actor, pull, requested_team=self.shapes.team(slug, repo)
            )

    # ---------------------------------------------------------------- issue comments and reactions
    def add_issue_comment(
        self,
        repo: Repo,
        pull: Pull,
        actor: str,
        body: str,
        emit: Emit,
        *,
        association: str | None = None,
        via_app: bool = False,
    ) -> IssueComment:
        if not body:
            raise validation_failed("IssueComment", "body", "missing_field")
        comment_id = self.world.new_id()
        now = self.world.iso()
        comment = IssueComment(
            id=comment_id,
            node_id=node_id("IC", comment_id),
            repo=repo.key,
            number=pull.number,
            user=self.world.user(actor).login,
            body=body,
            created_at=now,
            updated_at=now,
            author_association=association or self.association(repo, actor),
            via_app=via_app,
        )
        self.world.issue_comments[comment.id] = comment
        emit("issue_comment", self._issue_comment_payload(repo, pull, comment, "created", actor))
        return comment

    def edit_issue_comment(
        self, repo: Repo, comment: IssueComment, actor: str, body: str, emit: Emit
    ) -> None:
        if not body:
            raise validation_failed("IssueComment", "body", "missing_field")
        before = comment.body
        comment.body = body
        comment.updated_at = self.world.iso()
        pull = self.world.pull(repo, comment.number)
        payload = self._issue_comment_payload(repo, pull, comment, "edited", actor)
        payload["changes"] = {"body": {"from": before}}
        emit("issue_comment", payload)

    def _issue_comment_payload(
        self, repo: Repo, pull: Pull, comment: IssueComment, action: str, actor: str
    ) -> dict[str, Any]:
        return self.shapes.envelope(
            action,
            repo,
            actor,
            issue=self.shapes.issue(pull),
            comment=self.shapes.issue_comment(comment),
        )

    def react(self, repo: Repo, subject: tuple[str, int], actor: str, content: Any) -> tuple[Reaction, bool]:
        if content not in REACTIONS:
            raise validation_failed("Reaction", "content", "invalid")
        login = self.world.user(actor).login
        for existing in self.world.reactions:
            same_target = existing.repo == repo.key and existing.subject == subject
            if same_target and existing.user == login and existing.content == content:
                return existing, False
        reaction_id = self.world.new_id()
        reaction = Reaction(
            reaction_id, node_id("REA", reaction_id), repo.key, subject, login, str(content), self.world.iso()
        )
        self.world.reactions.append(reaction)
        return reaction, True

    # ---------------------------------------------------------------- check runs
    def create_check_run(self, repo: Repo, actor: str, body: dict[str, Any], emit: Emit) -> CheckRun:
        name, head_sha = body.get("name"), body.get("head_sha")
        if not isinstance(name, str) or not name:
            raise validation_failed("CheckRun", "name", "missing_field")
        if not isinstance(head_sha, str) or head_sha not in repo.commits:
            raise ApiError(422, f"No commit found for SHA: {head_sha}")
        run_id = self.world.new_id()
        now = self.world.iso()
        run = CheckRun(
            id=run_id,
            node_id=node_id("CR", run_id),
            repo=repo.key,
            name=name,
            head_sha=head_sha,
            status="queued",
            conclusion=None,
            started_at=str(body.get("started_at") or now),
            completed_at=None,
            title=None,
            summary=None,
            text=None,
            external_id=str(body.get("external_id") or ""),
            details_url=body.get("details_url"),
            check_suite_id=self.world.check_suite_id(repo, head_sha),
        )
        self._apply_check_update(run, body)
        self.world.check_runs[run.id] = run
        emit("check_run", self._check_payload(repo, run, "created", actor))
        if run.status == "completed":
            emit("check_run", self._check_payload(repo, run, "completed", actor))
        return run

    def update_check_run(
        self, repo: Repo, run: CheckRun, actor: str, body: dict[str, Any], emit: Emit
    ) -> None:
        was_completed = run.status == "completed"
        if "name" in body and isinstance(body["name"], str):
            run.name = body["name"]
        if "external_id" in body:
            run.external_id = str(body["external_id"] or "")
        if "details_url" in body:
            run.details_url = body["details_url"]
        self._apply_check_update(run, body)
        if run.status == "completed" and not was_completed:
            emit("check_run", self._check_payload(repo, run, "completed", actor))

    def _apply_check_update(self, run: CheckRun, body: dict[str, Any]) -> None:
        status, conclusion = body.get("status"), body.get("conclusion")
        if status is not None and status not in CHECK_STATUSES:
            raise validation_failed("CheckRun", "status", "invalid")
        if conclusion is not None and conclusion not in CHECK_CONCLUSIONS:
            raise validation_failed("CheckRun", "conclusion", "invalid")
        if status == "completed" and conclusion is None and run.conclusion is None:
            raise validation_failed(
                "CheckRun", "conclusion", "missing_field", "conclusion is required when status is completed"
            )
        output = body.get("output")
        annotations: list[Any] = []
        if isinstance(output, dict):
            raw = output.get("annotations") or []
            annotations = raw if isinstance(raw, list) else []
            if len(annotations) > MAX_ANNOTATIONS:
                raise validation_failed(
                    "CheckRun",
                    "annotations",
                    "invalid",
                    f"Only {MAX_ANNOTATIONS} annotations are accepted per request",
                )
        if isinstance(status, str):
            run.status = status
        if isinstance(conclusion, str):
            run.conclusion = conclusion
            run.status = "completed"
        if run.status == "completed":
            run.completed_at = str(body.get("completed_at") or run.completed_at or self.world.iso())
        if isinstance(output, dict):
            for key in ("title", "summary", "text"):
                if key in output:
                    setattr(run, key, output[key])
            run.annotations.extend(a for a in annotations if isinstance(a, dict))

    def _check_payload(self, repo: Repo, run: CheckRun, action: str, actor: str) -> dict[str, Any]:
        return self.shapes.envelope(action, repo, actor, check_run=self.shapes.check_run(run, webhook=True))

    def rerequest_check_run(self, repo: Repo, run: CheckRun, actor: str, emit: Emit) -> None:
        emit("check_run", self._check_payload(repo, run, "rerequested", actor))

    # ---------------------------------------------------------------- threads
    def set_thread_resolved(self, thread: Thread, actor: str, resolved: bool, emit: Emit) -> None:
        if thread.is_resolved == resolved:
            return
        thread.is_resolved = resolved
        thread.resolved_by = self.world.user(actor).login if resolved else None
        repo = self.world.repo(thread.repo)
        pull = self.world.pull(repo, thread.number)
        comments = [self.shapes.review_comment(self.world.review_comments[i]) for i in thread.comment_ids]
        emit(
            "pull_request_review_thread",
            self.shapes.envelope(
                "resolved" if resolved else "unresolved",
                repo,
                actor,
                pull_request=self.shapes.pull(pull, simple=True),
                thread={"node_id": thread.node_id, "comments": comments},
            ),
        )
