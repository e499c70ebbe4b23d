"""How a deployment and a repository are set up.

The environment's settings (``config.Settings``, validated once at startup), a repository's
``.github/{slug}.yml`` (``repoconfig``), the database URL as pasted (``dburl``), the log format
(``logs``) and the event loop (``eventloop``).
"""
