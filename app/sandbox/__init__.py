"""An offline fake of the parts of GitHub the bot uses, served over real HTTP on 127.0.0.1.

Used by the tests and by ``python -m app demo`` (which is why it lives in ``app`` and graphql-core
is a dependency); the serving code (``serve``, ``worker``) never imports it. It imports nothing
test-only: request/webhook validation against GitHub's published descriptions is plugged in from
the outside through ``Validator``.
"""

from .errors import ApiError
from .fake import FakeGitHub
from .recording import Call, Validator

__all__ = ["ApiError", "Call", "FakeGitHub", "Validator"]
