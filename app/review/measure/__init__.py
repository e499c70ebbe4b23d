"""Measuring the reviewer on local git, never on GitHub.

A pull request from a local repository
(``local``), a corpus of seeded cases (``evaluate``), the cost on ordinary commits
(``history``), and regressions mined from a repository's history and reviewed as pull
requests (``history_mine``, reading git with ``blame``; ``history_eval``)."""
