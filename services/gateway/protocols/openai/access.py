"""Who may call `/v1` and how much: the API's bearer token or an API key with scope `chat` (an
OpenAI client sends either as its API key), the same per-user rate limit, and the tier-1
guardrail on what the user wrote (`admission`: the API applies these in middleware under
`/api/v1` only). Audit, body limits, request ids and metrics come from the gateway's outer
middleware."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated

from fastapi import Depends, Request

from services.gateway.access.admission import admit, check_text
from services.gateway.access.principal import Principal
from services.gateway.problems import ApiProblem

# The `code` an OpenAI client expects for these refusals (its SDK shows it).
OPENAI_CODES = {401: "invalid_api_key", 429: "rate_limit_exceeded"}


async def caller(request: Request) -> Principal:
    """The authenticated caller, within their rate limit (401 / 429 otherwise)."""
    try:
        return await admit(request.app.state, request.scope, request.headers.get("authorization"), ("chat",))
    except ApiProblem as problem:
        problem.type = OPENAI_CODES.get(problem.status, problem.type)
        raise


Caller = Annotated[Principal, Depends(caller)]


async def guard(request: Request, texts: Iterable[str]) -> list[str]:
    """The tier-1 guardrail on the user's words: a block is a 400 (and a guardrail event, as on
    the API); a grey verdict's rules are returned for the run's task."""
    return await check_text(request.app.state, request.scope, texts, "input")
