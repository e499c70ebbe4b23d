"""The only code that talks to GitHub.

Its face: ``calls`` (every call an installation makes, one function each, keyword-only after
``gh``; REST where GraphQL has no equivalent), the ``client.GitHubClient`` they are made with and
the serving bot's ``installation.InstallationClient``, the App's own calls (``app``), and what a
failure means (``errors``). Inside: the JWT and installation tokens (``auth``), pacing below
GitHub's limits (``ratelimit``), conditional requests (``cache``), the GraphQL documents
(``graphql``).
"""
