"""One base for every error Agentix raises on purpose.

An `AgentixError` carries a machine-readable `code` (the same word a tool reply's
`error.code` or a problem+json `type` uses), whether it is `retryable` and, where the error
can reach an HTTP client, the `http_status` the gateway answers with. Catching `AgentixError`
therefore means "a failure we know how to describe", as opposed to a bug.

`retryable` is what a retry decision reads — never the code: the model layer retries an
attempt, ingestion hands a job back for another delivery, a tool reply tells its caller. A
class states what its failures are; an instance may say otherwise (`code` works the same way).

Exceptions used only for control flow inside one module (a private `_Stop`, a
"waiting for approval" signal) deliberately do not derive from it: they are not failures.
"""

from __future__ import annotations


class AgentixError(Exception):
    """A described failure: `code` for programs, the message for people."""

    code: str = "error"
    http_status: int = 500
    # Another attempt at the same thing may succeed: the cause can pass by itself (an election,
    # a restart, a rate limit, a server coming back). False unless a class or instance says so:
    # a failure nobody described as passing is not tried again and again.
    retryable: bool = False

    def __init__(
        self,
        message: str = "",
        *,
        code: str | None = None,
        http_status: int | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if http_status is not None:
            self.http_status = http_status
        if retryable is not None:
            self.retryable = retryable
