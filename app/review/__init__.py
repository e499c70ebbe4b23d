"""The review engine: a pull request in, a verdict and findings out.

It never talks to GitHub: it receives a pull-request context (metadata,
changed files with patches, and a reader for file contents at the head commit) and returns a
verdict, a summary and findings. Handlers build the context from GitHub; ``review --git``
builds it from a local repository.

By concern, each folder importing only those below it (``pyproject.toml``'s layers contract):
``measure`` (eval and history on local git), ``llm`` (the model reviewer) and ``output`` (what a
result becomes); ``engine`` (the built-in reviewer) and ``rounds`` (the bot's earlier rounds);
``analyzers`` (the built-in rules) and ``isolation`` (the execution boundary); ``core`` (what
they all share)."""
