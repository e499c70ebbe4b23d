"""What a comment asks of the bot: pure parsing of ``@slug ...`` mentions.

A mention counts only in prose: not inside fenced code blocks, inline code spans, or quoted
(``>``) lines, since quoting someone else's ``@slug review`` is not asking again. Matching is
case-insensitive and on a whole login (``@revbot-x`` or ``email@revbot`` are not mentions).
"""

from __future__ import annotations

import enum
import re


class Command(enum.StrEnum):
    REVIEW = "review"
    HELP = "help"
    RESOLVE = "resolve"
    STATUS = "status"


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"(`+)(?:.+?)\1", re.DOTALL)
_REVIEW_WORDS = re.compile(
    r"\b(review|re-?review|look|check|feedback|thoughts|opinion|again|ptal|lgtm\?)\b", re.IGNORECASE
)

HELP_TEXT = """\
Commands (mention me in a pull request comment):

| command | what happens |
| --- | --- |
| `@{slug} review` | I review the current head and post one review with inline comments. |
| `@{slug} resolve` | I check my open threads at the current head and resolve those whose problem is fixed. |
| `@{slug} status` | Whether this pull request looks ready to merge, now (I never merge). |
| `@{slug} help` | This list. |

A plain request that mentions me works too, for example "@{slug} can you take a look?".

You can also request a review from **{decoy}**: I answer with a review and then remove that request.
I take requests from the pull request's author and from the repository's owners, members and collaborators.
Reply in one of my threads when you have fixed its problem: I check the code and resolve the thread."""


def prose(body: str) -> str:
    """The comment without code blocks, code spans and quoted lines."""
    kept: list[str] = []
    fence: str | None = None
    for line in body.replace("\r\n", "\n").split("\n"):
        opening = _FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            continue
        if line.lstrip().startswith(">"):
            continue
        kept.append(line)
    return _INLINE_CODE.sub(" ", "\n".join(kept))


def _mention(slug: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w@/.-])@{re.escape(slug)}(?![\w-]|\[bot\])", re.IGNORECASE)


def parse_command(body: str | None, slug: str) -> Command | None:
    """The command a comment gives the bot, or None when it does not address the bot.

    ``@slug help`` asks for help; ``@slug review`` or a plain ask that mentions the bot (with a
    word like "review", "look", "check", or nothing else at all) asks for a review. A mention in
    passing ("thanks @slug!") asks for nothing.
    """
    text = prose(body or "")
    mention = _mention(slug)
    found = mention.search(text)
    if found is None:
        return None
    after = text[found.end() :].lstrip(" \t:,;-").split()
    first = after[0].strip(".,:;!?").lower() if after else ""
    if first == "help":
        return Command.HELP
    if first == "resolve":
        return Command.RESOLVE
    if first == "status":
        return Command.STATUS
    if first == "review":
        return Command.REVIEW
    remainder = mention.sub(" ", text)
    if _REVIEW_WORDS.search(remainder) or not remainder.strip(" \n\t.,:;!?"):
        return Command.REVIEW
    return None


_CLAIM = re.compile(
    r"\b(fixed|fix(ed)? (it|this|that)|done|addressed|resolved|removed|updated|changed|corrected|"
    r"should be (good|ok|fine)|ptal|take another look|good now|now ok)\b|\u2705|:white_check_mark:",
    re.IGNORECASE,
)
_DISPUTE = re.compile(
    r"\b(intentional|on purpose|by design|false positive|won'?t fix|not a bug|disagree)\b", re.IGNORECASE
)


def claims_fix(body: str | None) -> bool:
    """Whether a reply in one of the bot's threads says the problem was fixed (a prompt to check,
    never proof). An argument ("this is intentional because ...") is not a claim of a fix."""
    text = prose(body or "")
    return bool(_CLAIM.search(text)) and not _DISPUTE.search(text)
