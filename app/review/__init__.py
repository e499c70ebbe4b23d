"""The review engine. It never talks to GitHub: it receives a pull-request context (metadata,
changed files with patches, and a reader for file contents at the head commit) and returns a
verdict, a summary and findings. Handlers build the context from GitHub; ``review --git``
builds it from a local repository."""
