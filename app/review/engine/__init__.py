"""The built-in reviewer (``builtin``, ``REVIEWER=builtin``).

It selects the files, reads what the
analyzers need, runs them as jobs inside the execution boundary (``bounded``) and decides the
verdict; ``rules`` prints their catalogue, ``ruffpins`` resolves the ruff a repository pins, and
``inert`` makes the text a pull request controls harmless wherever the bot posts it. It never
talks to GitHub and never imports the language-model reviewer."""
