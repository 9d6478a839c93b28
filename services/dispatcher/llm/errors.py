"""Turning whatever one model call raised into an `AttemptError` with an LLMError code, a clear
message, and what to do about it (retry? count against the breaker?)."""

from __future__ import annotations

import email.utils
import json
import time

import httpx2
import openai
import pydantic

from shared.errors import AgentixError

# Failures that say the model/endpoint is unhealthy (they count against its circuit breaker).
# bad_request / context_too_long are about one request, not about the model.
BREAKER_CODES = frozenset({"rate_limited", "timeout", "unavailable", "stream_broken", "auth", "model_not_found"})
RETRYABLE_CODES = frozenset({"rate_limited", "timeout", "unavailable"})
CONTEXT_CODES = ("context_length_exceeded", "context_too_long", "string_above_max_length")
CONTEXT_PHRASES = (
    "maximum context length",
    "context length",
    "context window",
    "too many tokens",
    "prompt is too long",
)


class AttemptError(AgentixError):
    """One failed attempt at one model: `code` is an LLMError code, `retry_after` the wait the
    server asked for (seconds), `retryable` whether another attempt at this model may help."""

    def __init__(self, code: str, message: str, retry_after: float | None = None, retryable: bool = False) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after
        self.retryable = retryable

    def __repr__(self) -> str:
        return f"AttemptError({self.code!r}, {self.message!r}, retry_after={self.retry_after!r})"

    @property
    def counts_for_breaker(self) -> bool:
        return self.code in BREAKER_CODES


def _retry_after(headers: httpx2.Headers | None) -> float | None:
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if not value:
            continue
        try:
            return max(0.0, float(value) / divisor)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value:
        try:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
        except (TypeError, ValueError):
            return None
    return None


def _detail(exc: openai.APIStatusError) -> tuple[str | None, str]:
    """The provider's error code and message from the OpenAI error body."""
    body = exc.body
    code = getattr(exc, "code", None)
    message = getattr(exc, "message", "") or str(exc)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            code = code or err.get("code")
            message = str(err.get("message") or message)
        elif isinstance(err, str):
            message = err
    return (str(code) if code else None), message


def classify(exc: BaseException, model: str, timeout_s: float) -> AttemptError:
    """Map an exception from the openai client (or from parsing its stream) to an AttemptError."""
    who = f"model {model!r}"
    if isinstance(exc, openai.APITimeoutError):
        return AttemptError("timeout", f"{who} timed out (no response within {timeout_s:g}s)", retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        return AttemptError("unavailable", f"{who} is unreachable: {exc.__cause__ or exc}", retryable=True)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        code, detail = _detail(exc)
        if status == 429:
            if code == "insufficient_quota":
                return AttemptError("rate_limited", f"{who}: quota exhausted (HTTP 429): {detail}")
            wait = _retry_after(exc.response.headers)
            # The wait goes into the message too: it is what a person is told (retry after N s).
            said = f"; retry after {wait:g} s" if wait is not None else ""
            return AttemptError(
                "rate_limited",
                f"{who} is rate limited (HTTP 429): {detail}{said}",
                retry_after=wait,
                retryable=True,
            )
        if status in (401, 403):
            return AttemptError("auth", f"{who}: authentication failed (HTTP {status}): {detail}")
        if status == 404:
            return AttemptError("model_not_found", f"{who} was not found at its endpoint (HTTP 404): {detail}")
        if status == 413 or code in CONTEXT_CODES or any(p in detail.lower() for p in CONTEXT_PHRASES):
            return AttemptError("context_too_long", f"{who}: the prompt is too long for the context window: {detail}")
        if status in (408, 409) or status >= 500:
            return AttemptError(
                "unavailable",
                f"{who} failed (HTTP {status}): {detail}",
                retry_after=_retry_after(exc.response.headers),
                retryable=True,
            )
        return AttemptError("bad_request", f"{who} rejected the request (HTTP {status}): {detail}")
    if isinstance(exc, openai.APIError):  # an error event inside a stream
        return AttemptError("stream_broken", f"{who} sent an error in its stream: {exc}")
    if isinstance(exc, json.JSONDecodeError | pydantic.ValidationError):
        return AttemptError("stream_broken", f"{who} sent a malformed response: {type(exc).__name__}: {exc}")
    if isinstance(exc, httpx2.TimeoutException):
        return AttemptError("timeout", f"{who} timed out (no data within {timeout_s:g}s)", retryable=True)
    if isinstance(exc, httpx2.HTTPError):
        return AttemptError("unavailable", f"{who}: connection failed: {exc}", retryable=True)
    return AttemptError("unavailable", f"{who}: unexpected failure: {type(exc).__name__}: {exc}")


# The exceptions `classify` understands; anything else (BudgetExceeded, cancellation, a failing
# event sink) is not a model failure and propagates unchanged.
MODEL_EXCEPTIONS: tuple[type[BaseException], ...] = (
    openai.OpenAIError,
    json.JSONDecodeError,
    pydantic.ValidationError,
    httpx2.HTTPError,
)
