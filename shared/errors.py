"""One base for every error Agentix raises on purpose.

An `AgentixError` carries a machine-readable `code` (the same word a tool reply's
`error.code` or a problem+json `type` uses) and, where the error can reach an HTTP
client, the `http_status` the gateway answers with. Catching `AgentixError` therefore
means "a failure we know how to describe", as opposed to a bug.

Exceptions used only for control flow inside one module (a private `_Stop`, a
"waiting for approval" signal) deliberately do not derive from it: they are not failures.
"""

from __future__ import annotations


class AgentixError(Exception):
    """A described failure: `code` for programs, the message for people."""

    code: str = "error"
    http_status: int = 500

    def __init__(self, message: str = "", *, code: str | None = None, http_status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if http_status is not None:
            self.http_status = http_status
