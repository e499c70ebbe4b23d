"""The pull request's final conversation as one self-contained HTML page, styled like GitHub's.

Built from the fake's world after the story: the opening post, pushes, reviews with a verdict
badge (dismissed ones marked, with the dismissal message), their inline threads with a few lines
of code from the diff hunk, resolved threads collapsed in ``<details>``, conversation comments,
and the review decision and checks at the bottom. No scripts, no external resources: inline CSS
only. Everything that came from the PR (titles, paths, bodies, code) is HTML-escaped; the small
Markdown subset rendered here only ever wraps already-escaped text in fixed tags, and links are
shown as text (a PR may carry ``javascript:`` URLs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape, unescape

from ..events import ReviewState
from ..sandbox import FakeGitHub
from ..sandbox.state import IssueComment, Pull, Repo, Review, ReviewComment, Thread
from .timeline import strip_markers

CONTEXT_LINES = 4
CSP = "default-src 'none'; style-src 'unsafe-inline'"  # nothing may load, nothing may run

CSS = """
*{box-sizing:border-box}
body{margin:0;background:#fff;color:#1f2328;font:14px/1.5 -apple-system,BlinkMacSystemFont,"Segoe UI",
Helvetica,Arial,sans-serif}
.page{max-width:980px;margin:0 auto;padding:24px 16px 48px}
h1{font-size:26px;font-weight:400;margin:0 0 8px}
h1 .num{color:#59636e;font-weight:300}
.meta{color:#59636e;padding-bottom:16px;border-bottom:1px solid #d1d9e0;margin-bottom:16px}
.state{display:inline-block;padding:4px 12px;border-radius:2em;color:#fff;background:#1f883d;
font-weight:600;margin-right:8px}
.state.closed{background:#cf222e}
.timeline{position:relative;padding-left:56px}
.timeline:before{content:"";position:absolute;left:71px;top:0;bottom:0;width:2px;background:#d1d9e0}
.item{position:relative;margin:0 0 16px}
.avatar{position:absolute;left:-56px;top:0;width:40px;height:40px;border-radius:50%;color:#fff;
font-weight:700;font-size:16px;display:flex;align-items:center;justify-content:center;background:#8250df}
.avatar.bot{border-radius:8px;background:#0969da}
.box{position:relative;background:#fff;border:1px solid #d1d9e0;border-radius:6px}
.box>.head{background:#f6f8fa;border-bottom:1px solid #d1d9e0;padding:8px 16px;color:#59636e;
border-radius:6px 6px 0 0}
.head b{color:#1f2328}
.body{padding:12px 16px}
.body:empty{display:none}
.event{margin-left:16px;padding:4px 0;color:#59636e;position:relative}
.event .dot{display:inline-block;width:28px;height:28px;border-radius:50%;background:#eaeef2;
margin-right:8px;vertical-align:middle;text-align:center;line-height:28px;font-size:12px}
.badge{display:inline-block;padding:0 8px;border-radius:2em;font-size:12px;font-weight:600;
line-height:20px;border:1px solid transparent;margin-left:6px}
.b-changes{background:#ffebe9;color:#d1242f;border-color:#ff818266}
.b-approved{background:#dafbe1;color:#1a7f37;border-color:#4ac26b66}
.b-commented{background:#f6f8fa;color:#59636e;border-color:#d1d9e0}
.b-dismissed{background:#fff8c5;color:#9a6700;border-color:#d4a72c66}
.b-resolved{background:#ddf4ff;color:#0969da;border-color:#54aeff66}
.b-outdated{background:#fff8c5;color:#9a6700;border-color:#d4a72c66}
.dismissed .body{opacity:.55}
.dismissal{padding:8px 16px;background:#fff8c5;border-top:1px solid #d4a72c66;color:#6f4e00}
.thread{margin:12px 16px;border:1px solid #d1d9e0;border-radius:6px;overflow:hidden}
.thread>summary,.thread>.path{display:block;padding:8px 12px;background:#f6f8fa;
font:12px ui-monospace,SFMono-Regular,Menlo,monospace;cursor:pointer;border-bottom:1px solid #d1d9e0}
.thread.resolved>summary{color:#59636e}
table.code{width:100%;border-collapse:collapse;font:12px/20px ui-monospace,SFMono-Regular,Menlo,monospace}
table.code td{padding:0 8px;white-space:pre;vertical-align:top}
table.code td.ln{width:1%;color:#59636e;text-align:right;user-select:none}
table.code tr.add{background:#dafbe1}
table.code tr.del{background:#ffebe9}
table.code tr.hunk{background:#ddf4ff;color:#59636e}
table.code tr.target td{box-shadow:inset 0 -2px 0 #bf8700}
.comment{padding:10px 12px;border-top:1px solid #d1d9e0}
.comment .who{color:#59636e;font-size:12px;margin-bottom:4px}
.comment .who b{color:#1f2328}
.md p{margin:0 0 8px}
.md p:last-child{margin-bottom:0}
.md h2,.md h3,.md h4{font-size:15px;margin:8px 0}
.md code{background:#eff1f3;border-radius:4px;padding:1px 4px;font:12px ui-monospace,Menlo,monospace}
.md pre{background:#f6f8fa;padding:8px 12px;border-radius:6px;overflow:auto}
.md pre code{background:none;padding:0}
.md table{border-collapse:collapse;margin:8px 0}
.md th,.md td{border:1px solid #d1d9e0;padding:4px 10px;text-align:left}
.md blockquote{margin:0 0 8px;padding:0 12px;color:#59636e;border-left:3px solid #d1d9e0}
.md ul{margin:0 0 8px;padding-left:22px}
.suggestion{border:1px solid #d1d9e0;border-radius:6px;margin:8px 0;overflow:hidden}
.suggestion .shead{background:#f6f8fa;padding:4px 10px;font-size:12px;color:#59636e;
border-bottom:1px solid #d1d9e0}
.suggestion pre{margin:0;border-radius:0;background:#dafbe1}
.merge{margin-top:24px;border:1px solid #d1d9e0;border-radius:6px;padding:12px 16px}
.merge .row{padding:4px 0}
.ok{color:#1a7f37;font-weight:600}.bad{color:#d1242f;font-weight:600}.muted{color:#59636e}
"""

# Keyed by the fake's review states (plain strings, as GitHub sends them).
REVIEW_BADGE: dict[str, tuple[str, str, str]] = {
    ReviewState.APPROVED: ("approved these changes", "b-approved", "Approved"),
    ReviewState.CHANGES_REQUESTED: ("requested changes", "b-changes", "Changes requested"),
    ReviewState.COMMENTED: ("reviewed", "b-commented", "Commented"),
    ReviewState.DISMISSED: ("reviewed", "b-dismissed", "Dismissed"),
}


# ------------------------------------------------------------------------------ markdown subset
_INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_SUB = re.compile(r"&lt;sub&gt;(.*?)&lt;/sub&gt;")
_LINK = re.compile(r"\[([^\]\n]+)\]\([^)\s]*\)")


def _inline(text: str) -> str:
    """Escape ``text``; render code spans, bold, and links as their text only."""
    out: list[str] = []
    last = 0
    for match in _INLINE_CODE.finditer(text):
        out.append(_prose(text[last : match.start()]))
        out.append(f"<code>{escape(match.group(2).strip())}</code>")
        last = match.end()
    out.append(_prose(text[last:]))
    return "".join(out)


def _prose(text: str) -> str:
    # Markdown decodes character references outside code spans (``&lt;`` shows as ``<``).
    escaped = escape(unescape(_LINK.sub(r"\1", text)))
    escaped = _SUB.sub(r"<sub>\1</sub>", escaped)  # the one inline tag the bot writes
    return _BOLD.sub(r"<strong>\1</strong>", escaped)


def _table(rows: list[str]) -> str:
    cells = [[c.strip() for c in row.strip().strip("|").split("|")] for row in rows]
    cells = [r for r in cells if not all(re.fullmatch(r":?-{2,}:?", c) for c in r if c)]
    if not cells:
        return ""
    head, *body = cells
    html = "<table><thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr></thead><tbody>"
    for row in body:
        html += "<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>"
    return html + "</tbody></table>"


def markdown(text: str | None) -> str:
    """A safe rendering of the Markdown the bot and the people in the story write."""
    lines = strip_markers(text).split("\n")
    out: list[str] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            out.append("<p>" + "<br>".join(_inline(p) for p in paragraph) + "</p>")
            paragraph.clear()

    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        fence = re.match(r"^\s*(`{3,}|~{3,})\s*([\w-]*)", line)
        if fence:
            flush()
            block: list[str] = []
            index += 1
            while index < len(lines) and not lines[index].strip().startswith(fence.group(1)):
                block.append(lines[index])
                index += 1
            if fence.group(2) == "suggestion":  # GitHub shows a suggested change, not a code block
                code = escape("\n".join(block)) if block else "<i>remove this line</i>"
                head = '<div class="shead">Suggested change</div>'
                out.append(f'<div class="suggestion">{head}<pre>{code}</pre></div>')
            else:
                out.append(f"<pre><code>{escape(chr(10).join(block))}</code></pre>")
        elif stripped.startswith("|"):
            flush()
            rows = []
            while index < len(lines) and lines[index].strip().startswith("|"):
                rows.append(lines[index])
                index += 1
            out.append(_table(rows))
            continue
        elif heading := re.match(r"^(#{1,6})\s+(.*)$", stripped):
            flush()
            level = min(4, max(2, len(heading.group(1)) + 1))
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif re.match(r"^[-*]\s+", stripped):
            flush()
            items = []
            while index < len(lines) and re.match(r"^\s*[-*]\s+", lines[index]):
                items.append(re.sub(r"^\s*[-*]\s+", "", lines[index]))
                index += 1
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>")
            continue
        elif stripped.startswith(">"):
            flush()
            quoted = []
            while index < len(lines) and lines[index].strip().startswith(">"):
                quoted.append(lines[index].strip()[1:].lstrip())
                index += 1
            out.append("<blockquote>" + "<br>".join(_inline(q) for q in quoted) + "</blockquote>")
            continue
        elif not stripped:
            flush()
        else:
            paragraph.append(stripped)
        index += 1
    flush()
    return "".join(out)


# ------------------------------------------------------------------------------ code context
@dataclass
class CodeLine:
    kind: str  # "add" | "del" | "ctx" | "hunk"
    old: int | None
    new: int | None
    text: str


def hunk_lines(diff_hunk: str) -> list[CodeLine]:
    out: list[CodeLine] = []
    old = new = 0
    for raw in diff_hunk.split("\n"):
        header = re.match(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@", raw)
        if header:
            old, new = int(header.group(1)), int(header.group(2))
            out.append(CodeLine("hunk", None, None, raw))
        elif raw.startswith("+"):
            out.append(CodeLine("add", None, new, raw[1:]))
            new += 1
        elif raw.startswith("-"):
            out.append(CodeLine("del", old, None, raw[1:]))
            old += 1
        elif raw.startswith("\\"):
            continue
        else:
            out.append(CodeLine("ctx", old, new, raw[1:] if raw.startswith(" ") else raw))
            old += 1
            new += 1
    return out


def code_context(fake: FakeGitHub, comment: ReviewComment) -> str:
    """The few lines above the commented line: from the diff hunk, else from the file itself."""
    target = comment.original_line
    lines = [cl for cl in hunk_lines(comment.diff_hunk) if cl.kind != "hunk"]
    if lines:
        if comment.side == "RIGHT" and target is not None:
            upto = [i for i, cl in enumerate(lines) if cl.new == target and cl.kind != "del"]
            if upto:
                lines = lines[: upto[-1] + 1]
        shown = lines[-CONTEXT_LINES:]
    else:
        try:
            text = fake.world.commit(fake.world.repo(comment.repo), comment.original_commit_id).files[
                comment.path
            ]
        except (LookupError, KeyError):
            return ""
        if target is None:
            return ""
        numbered = text.split("\n")
        first = max(1, target - CONTEXT_LINES + 1)
        shown = [
            CodeLine("ctx", n, n, numbered[n - 1]) for n in range(first, target + 1) if n <= len(numbered)
        ]
    rows = []
    for index, cl in enumerate(shown):
        classes = {"add": "add", "del": "del"}.get(cl.kind, "")
        if index == len(shown) - 1:
            classes = f"{classes} target".strip()
        sign = {"add": "+", "del": "-"}.get(cl.kind, " ")
        rows.append(
            f'<tr class="{classes}"><td class="ln">{cl.old if cl.old is not None else ""}</td>'
            f'<td class="ln">{cl.new if cl.new is not None else ""}</td>'
            f"<td>{escape(sign + cl.text)}</td></tr>"
        )
    return f'<table class="code">{"".join(rows)}</table>'


# ------------------------------------------------------------------------------ the page
def _initial(login: str) -> str:
    return escape((login[:1] or "?").upper())


def _avatar(login: str) -> str:
    bot = " bot" if login.endswith("[bot]") else ""
    return f'<div class="avatar{bot}" aria-hidden="true">{_initial(login)}</div>'


def _comment_html(comment: ReviewComment | IssueComment) -> str:
    return (
        f'<div class="comment"><div class="who"><b>{escape(comment.user)}</b> '
        f"commented {escape(comment.created_at)}</div>"
        f'<div class="md">{markdown(comment.body)}</div></div>'
    )


def _thread_html(fake: FakeGitHub, thread: Thread) -> str:
    world = fake.world
    comments = [world.review_comments[i] for i in thread.comment_ids if i in world.review_comments]
    if not comments:
        return ""
    root = comments[0]
    place = f"{root.path}:{root.original_line}" if root.original_line is not None else root.path
    badges = ""
    if root.line is None and root.subject_type == "line":
        badges += '<span class="badge b-outdated">Outdated</span>'
    inner = code_context(fake, root) + "".join(_comment_html(c) for c in comments)
    if thread.is_resolved:
        who = escape(thread.resolved_by or "someone")
        badges += '<span class="badge b-resolved">Resolved</span>'
        summary = f"{escape(place)}{badges} <span class='muted'>resolved by {who}</span>"
        return f'<details class="thread resolved"><summary>{summary}</summary>{inner}</details>'
    return f'<div class="thread"><div class="path">{escape(place)}{badges}</div>{inner}</div>'


def _is_reply_only(fake: FakeGitHub, review: Review) -> bool:
    """A reply in a thread is stored as its own COMMENTED review; GitHub shows it in the thread only."""
    if review.body.strip() or not review.comment_ids:
        return False
    world = fake.world
    return all(
        world.review_comments[i].in_reply_to_id is not None
        for i in review.comment_ids
        if i in world.review_comments
    )


def _review_html(fake: FakeGitHub, review: Review, threads_by_root: dict[int, Thread]) -> str:
    verb, badge_class, badge = REVIEW_BADGE.get(review.state, ("reviewed", "b-commented", review.state))
    dismissed = review.state == ReviewState.DISMISSED
    threads = "".join(
        _thread_html(fake, threads_by_root[i]) for i in review.comment_ids if i in threads_by_root
    )
    dismissal = (
        f'<div class="dismissal"><b>Dismissed:</b> {_inline(review.dismissal_message or "")}</div>'
        if dismissed
        else ""
    )
    body = markdown(review.body)
    return (
        f'<div class="item review{" dismissed" if dismissed else ""}" data-state="{escape(review.state)}">'
        f"{_avatar(review.user)}"
        f'<div class="box"><div class="head"><b>{escape(review.user)}</b> {verb}'
        f'<span class="badge {badge_class}">{escape(badge)}</span>'
        f' <span class="muted">on {escape(review.commit_id[:7])}, {escape(review.submitted_at or "")}</span>'
        f'</div><div class="body md">{body}</div>{dismissal}{threads}</div></div>'
    )


def render_pull(
    fake: FakeGitHub,
    repo_name: str,
    number: int,
    *,
    bot_login: str,
    pushes: list[tuple[int, str]] | None = None,
    command: str = "python -m app demo",
) -> str:
    """The page. ``pushes``: (the largest world id that existed then, commit sha), to place
    pushes among the reviews and comments (ids come from one counter, so they order everything);
    ``command``: what played it (named at the bottom)."""
    world = fake.world
    repo = world.repo(repo_name)
    pull = world.pull(repo, number)
    title = f"{pull.title} · Pull Request #{number} · {repo.full_name}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f'<title>{escape(title)}</title><style>{CSS}</style></head><body><div class="page">'
        f'<h1>{escape(pull.title)} <span class="num">#{number}</span></h1>'
        f'<div class="meta"><span class="state{"" if pull.state == "open" else " closed"}">'
        f"{escape(pull.state.capitalize())}</span><b>{escape(pull.author)}</b> wants to merge into "
        f"<code>{escape(pull.base_ref)}</code> from <code>{escape(pull.head_ref)}</code> "
        f"in {escape(repo.full_name)}</div>"
        f'<div class="timeline">{_opening(pull)}{_timeline(fake, repo, pull, pushes or [])}</div>'
        f"{_merge_box(fake, repo, pull)}"
        f'<p class="muted">Rendered by <code>{escape(command)}</code> from the sandbox GitHub; '
        f"the bot is {escape(bot_login)}.</p>"
        "</div></body></html>\n"
    )


def _opening(pull: Pull) -> str:
    return (
        f'<div class="item">{_avatar(pull.author)}<div class="box"><div class="head"><b>'
        f"{escape(pull.author)}</b> opened this pull request {escape(pull.created_at)}</div>"
        f'<div class="body md">{markdown(pull.body) or "<p class=muted>No description provided.</p>"}'
        "</div></div></div>"
    )


def _timeline(fake: FakeGitHub, repo: Repo, pull: Pull, pushes: list[tuple[int, str]]) -> str:
    """Reviews, comments and pushes in the order they happened (a push before what its id saw)."""
    world = fake.world
    threads_by_root = {t.comment_ids[0]: t for t in world.threads_of(pull) if t.comment_ids}
    entries: list[tuple[int, int, str]] = []
    for review in world.reviews_of(pull):
        if review.state == ReviewState.PENDING or _is_reply_only(fake, review):
            continue
        entries.append((review.id, 1, _review_html(fake, review, threads_by_root)))
    for comment in world.issue_comments_of(repo, pull.number):
        entries.append(
            (
                comment.id,
                1,
                f'<div class="item">{_avatar(comment.user)}<div class="box"><div class="head">'
                f"<b>{escape(comment.user)}</b> commented {escape(comment.created_at)}</div>"
                f'<div class="body md">{markdown(comment.body)}</div></div></div>',
            )
        )
    for after_id, sha in pushes:
        commit = repo.commits.get(sha)
        if commit is None:
            continue
        entries.append(
            (
                after_id,
                0,
                f'<div class="event"><span class="dot">&#8226;</span><b>{escape(commit.author)}</b> pushed '
                f"<code>{escape(sha[:7])}</code> {escape(commit.message)}</div>",
            )
        )
    entries.sort(key=lambda e: (e[0], e[1]))
    return "".join(html for _, _, html in entries)


def _merge_box(fake: FakeGitHub, repo: Repo, pull: Pull) -> str:
    """The box above the merge button: review decision, requested reviewers, threads, checks."""
    world = fake.world
    decision = fake.review_decision(repo.full_name, pull.number)
    decision_html = {
        "APPROVED": '<span class="ok">Approved</span>',
        "CHANGES_REQUESTED": '<span class="bad">Changes requested</span>',
    }.get(decision or "", '<span class="muted">No decision</span>')
    runs = [r for r in world.check_runs.values() if r.repo == repo.key and r.head_sha == pull.head_sha]
    checks = "".join(
        f'<div class="row">{escape(r.name)}: '
        f'<span class="{"ok" if r.conclusion == "success" else "bad" if r.conclusion else "muted"}">'
        f"{escape(r.conclusion or r.status)}</span> <span class='muted'>{escape(r.title or '')}</span></div>"
        for r in runs
    )
    requested = ", ".join(pull.requested_reviewers) or "nobody"
    threads = world.threads_of(pull)
    resolved = sum(t.is_resolved for t in threads)
    return (
        f'<div class="merge"><div class="row"><b>Review decision:</b> {decision_html}</div>'
        f'<div class="row"><b>Requested reviewers:</b> {escape(requested)}</div>'
        f'<div class="row"><b>Conversations:</b> {resolved} of {len(threads)} resolved</div>'
        f"{checks}</div>"
    )


__all__ = ["code_context", "markdown", "render_pull"]
