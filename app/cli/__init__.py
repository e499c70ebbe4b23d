"""The command line, one module per group of commands (``app/__main__.py`` composes them)."""
