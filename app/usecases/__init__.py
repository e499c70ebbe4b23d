"""Use cases: what the bot does, as plain async functions of a GitHub client, the bot and typed inputs.

- ``review.review_pull``: review a pull request (a new review or a re-review of a sticky block),
  with its check run: the pipeline ``review.run`` (read, decide, analyse, plan, publish), which
  the command line's ``review`` and ``eval`` run too (``app/offline.py``).
- ``threads.verify_threads``: verify the bot's open threads at the PR's head and resolve the
  fixed ones.
- ``replies.reply_in_thread``: a reply in one of the bot's threads, a dispute or a cue to check it.
- ``decoy.drop_decoy``: take the decoy off the requested reviewers.
- ``learnings``: where the repository's learnings are kept (the store's table, or in memory); the
  review gets them as data.
- ``commands.answer_command``: check who asks and do what a comment's command asks, once.
- ``checks``: the bot's check runs (the review's, readiness's): found, started, completed and
  abandoned one way for both.
- ``pull``: what they share: the repository's settings, ``build_context`` (the engine's view of a
  PR) and ``analyse`` (the engine, cached by content).

Handlers (``app/handlers``) decide *whether* an event is theirs and call one of these; the CLI
calls them too. Every GitHub call goes through ``app/github/calls.py``.
"""
