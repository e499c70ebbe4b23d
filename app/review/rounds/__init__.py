"""The bot's earlier rounds on one pull request, read back from GitHub: the hidden markers it
writes into what it posts (``markers``), a finding's identity across pushes (``identity``), and
the pure decisions over its earlier reviews and threads (``decide``)."""
