"""Turning a failed model call into an `AttemptError` with an LLMError code, a clear message, and
what to do about it (retry? count against the breaker?): an HTTP error status with the
provider's error body (`status_error`), or a transport failure or malformed answer
(`transport_error`)."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from typing import Any

import aiohttp

from shared.errors import AgentixError

# Failures that say the model/endpoint is unhealthy (they count against its circuit breaker).
# bad_request / context_too_long are about one request, not about the model.
BREAKER_CODES = frozenset({"rate_limited", "timeout", "unavailable", "stream_broken", "auth", "model_not_found"})
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
        super().__init__(message, code=code, retryable=retryable)
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return f"AttemptError({self.code!r}, {self.message!r}, retry_after={self.retry_after!r})"

    @property
    def counts_for_breaker(self) -> bool:
        return self.code in BREAKER_CODES


# What is read of a refused request's body: the provider's error message is short.
ERROR_BODY_LIMIT = 64 * 1024


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
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


def _detail(status: int, body: str) -> tuple[str | None, str]:
    """The provider's error code and message from an OpenAI error body (`{"error": {"message",
    "code", …}}`); a body that is not one is the message itself."""
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    code: Any = None
    message = body.strip()[:500] or f"HTTP {status}"
    if isinstance(parsed, dict):
        err = parsed.get("error", parsed)
        if isinstance(err, dict):
            code = err.get("code")
            message = str(err.get("message") or message)
        elif isinstance(err, str):
            message = err
    return (str(code) if code else None), message


async def error_body(response: aiohttp.ClientResponse) -> str:
    """The body of a refused request, bounded: what the provider says went wrong ("" when even
    that cannot be read)."""
    try:
        raw = await response.content.read(ERROR_BODY_LIMIT)
    except aiohttp.ClientError:
        return ""
    return raw.decode(errors="replace")


def status_error(status: int, headers: Mapping[str, str] | None, body: str, model: str) -> AttemptError:
    """The AttemptError of a request the endpoint answered with an HTTP error status."""
    who = f"model {model!r}"
    code, detail = _detail(status, body)
    if status == 429:
        if code == "insufficient_quota":
            return AttemptError("rate_limited", f"{who}: quota exhausted (HTTP 429): {detail}")
        wait = _retry_after(headers)
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
            retry_after=_retry_after(headers),
            retryable=True,
        )
    return AttemptError("bad_request", f"{who} rejected the request (HTTP {status}): {detail}")


def transport_error(exc: BaseException, model: str, timeout_s: float, *, answering: bool) -> AttemptError:
    """The AttemptError of a call that got no usable answer: the connection failed or went quiet
    before the answer began (`answering` False) or while it was being read, or what came is not
    the protocol's JSON."""
    who = f"model {model!r}"
    if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
        return AttemptError("stream_broken", f"{who} sent a malformed response: {type(exc).__name__}: {exc}")
    if isinstance(exc, aiohttp.ServerTimeoutError):
        waited = "data" if answering else "response"
        return AttemptError("timeout", f"{who} timed out (no {waited} within {timeout_s:g}s)", retryable=True)
    if not answering and isinstance(exc, aiohttp.ClientConnectionError):
        return AttemptError("unavailable", f"{who} is unreachable: {exc}", retryable=True)
    if isinstance(exc, aiohttp.ClientError):
        return AttemptError("unavailable", f"{who}: connection failed: {exc}", retryable=True)
    return AttemptError("unavailable", f"{who}: unexpected failure: {type(exc).__name__}: {exc}")


# The exceptions `transport_error` understands; anything else (an AttemptError already,
# BudgetExceeded, cancellation, a failing event sink) is not a transport failure and propagates
# unchanged.
MODEL_EXCEPTIONS: tuple[type[BaseException], ...] = (aiohttp.ClientError, json.JSONDecodeError, UnicodeDecodeError)
