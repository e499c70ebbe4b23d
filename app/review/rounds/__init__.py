"""What the bot's earlier rounds left, read back from GitHub.

The hidden markers it writes into
what it posts (``markers``), a finding's identity across pushes (``identity``), the pure decisions
over its earlier reviews and threads (``decide``), the findings overruled on a pull request
(``overrule``) and the disputes a repository remembers (``learnings``)."""
