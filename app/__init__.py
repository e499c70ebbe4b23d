"""revbot: a GitHub App that reviews pull requests and follows through on its own reviews."""

__version__ = "0.1.0"
