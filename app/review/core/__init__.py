"""What every part of the review shares.

The engine's types (``model``), a patch's lines
(``diff``), which changed files are reviewed (``selection``), the repository's own lint and tool
configuration (``lintconfig``, ``toolconfig``) and the bounded compilation of the patterns they
carry (``patterns``). Pure, and imports nothing else of ``app.review``: the analyzers, the
engines and the measurements all build on it."""
