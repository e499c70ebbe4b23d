"""What a comment asks of the bot: pure parsing of ``@slug ...`` mentions.

A mention counts only in prose: not inside fenced code blocks, inline code spans, or quoted
(``>``) lines, since quoting someone else's ``@slug review`` is not asking again. Matching is
case-insensitive and on a whole login (``@revbot-x`` or ``email@revbot`` are not mentions).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class Command(enum.StrEnum):
    REVIEW = "review"
    HELP = "help"
    RESOLVE = "resolve"
    # "dismiss" is the word people type in a thread of the bot to overrule its finding
    # (usecases.disputes); dismissing a review is GitHub's, which no command does.
    OVERRULE = "dismiss"
    LEARNINGS = "learnings"
    FORGET = "forget"
    STATUS = "status"
    PAUSE = "pause"  # stay quiet on this pull request (usecases.pause)
    RESUME = "resume"


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
| `@{slug} dismiss <reason>` | In my thread: withdraw its finding here (`--always`: remember it). |
| `@{slug} learnings` | The findings this repository's maintainers told me to leave out, numbered. |
| `@{slug} forget N` | Stop leaving out learning N (write access). |
| `@{slug} status` | Whether this pull request looks ready to merge, now (I never merge). |
| `@{slug} pause` | No reviews, re-reviews or readiness comments here until resumed (write access). |
| `@{slug} resume` | Undo `pause` (write access). |
| `@{slug} help` | This list. |

A plain request that mentions me works too, for example "@{slug} can you take a look?".

You can also request a review from **{decoy}**: I answer with a review and then remove that request.
I take requests from the pull request's author and from the repository's owners, members and collaborators.
Reply in one of my threads when you have fixed its problem: I check the code and resolve the thread.
A reply such as "false positive" or "won't fix" (or a 👎 on my comment, read when I next look at my
threads) from someone with write access (the author: concerns and nits only) withdraws it."""


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
    if first in (Command.OVERRULE, Command.LEARNINGS, Command.FORGET, Command.PAUSE, Command.RESUME):
        return Command(first)
    if first == "status":
        return Command.STATUS
    if first == "review":
        return Command.REVIEW
    remainder = mention.sub(" ", text)
    if _REVIEW_WORDS.search(remainder) or not remainder.strip(" \n\t.,:;!?"):
        return Command.REVIEW
    return None


def only_a_command(body: str | None, slug: str) -> bool:
    """Whether a comment does nothing but give the bot a command (``@slug review``, a bare
    ``@slug``): it says nothing about the code, so a model judging the code is not shown it."""
    command = parse_command(body, slug)
    if command is None:
        return False
    words = [w.strip(".,:;!?").lower() for w in _mention(slug).sub(" ", body or "").split()]
    return [w for w in words if w] in ([], [command.value])


_CLAIM = re.compile(
    r"\b(fixed|fix(ed)? (it|this|that)|done|addressed|resolved|removed|updated|changed|corrected|"
    r"should be (good|ok|fine)|ptal|take another look|good now|now ok)\b|\u2705|:white_check_mark:",
    re.IGNORECASE,
)
_DISPUTE = re.compile(
    r"\b(intentional|on purpose|by design|false positive|won'?t fix|not a bug|disagree)\b", re.IGNORECASE
)
# A dispute that overrules (the words above minus a mere "disagree", which argues without deciding).
_OVERRULE = re.compile(
    r"\b(intentional(ly)?|on purpose|by design|false[ -]positive|won'?t ?fix|not a bug|ignore this)\b",
    re.IGNORECASE,
)
_ALWAYS = re.compile(r"(?<!\S)--always(?!\S)")


def claims_fix(body: str | None) -> bool:
    """Whether a reply in one of the bot's threads says the problem was fixed (a prompt to check,
    never proof). An argument ("this is intentional because ...") is not a claim of a fix."""
    text = prose(body or "")
    return bool(_CLAIM.search(text)) and not _DISPUTE.search(text)


@dataclass(frozen=True, slots=True)
class Dispute:
    """A reply in one of the bot's threads that disputes its finding."""

    reason: str  # what the person said (one line, capped); "" when they gave no words
    always: bool = False  # ``--always``: remember it for the repository


MAX_DISPUTE_REASON = 300


def parse_dispute(body: str | None, slug: str) -> Dispute | None:
    """``@slug dismiss [--always] <reason>``, or a reply with words such as "false positive",
    "intentional", "won't fix". None for anything else (a claimed fix, an argument, a question)."""
    text = prose(body or "")
    found = _mention(slug).search(text)
    if found is not None:
        after = text[found.end() :].lstrip(" \t:,;-")
        word, _, rest = after.partition(" ")
        if word.strip(".,:;!?").lower() == Command.OVERRULE:
            always = bool(_ALWAYS.search(rest))
            reason = " ".join(_ALWAYS.sub(" ", rest).split())[:MAX_DISPUTE_REASON]
            return Dispute(reason=reason, always=always)
    if _OVERRULE.search(text):
        return Dispute(reason=" ".join(text.split())[:MAX_DISPUTE_REASON])
    return None


def parse_forget(body: str | None, slug: str) -> int | None:
    """The learning number of ``@slug forget N`` (``#N`` too); None without a number."""
    text = prose(body or "")
    found = _mention(slug).search(text)
    if found is None:
        return None
    match = re.match(r"\s*forget\s+#?(\d{1,18})\b", text[found.end() :], re.IGNORECASE)
    return int(match.group(1)) if match else None
