"""What a review's result becomes.

The review and check run GitHub is sent (``render``; each
inline comment, ``comments``), and the command line's text and JSON (``report``). Pure: no I/O."""
