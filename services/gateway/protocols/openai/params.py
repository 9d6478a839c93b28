"""The top-level parameters of a `/v1` request that are neither the prompt nor the client's tools:
each is honoured, accepted as a no-op where it truly cannot change the answer, or refused with a
400 naming it (docs/API.md, "Parameters"). A parameter Agentix does not know at all is a 400
naming it too, as OpenAI's own API answers one: never silently ignored.

Honoured: the sampling choices (`Sampling`) go to the answering agent's model.
No-ops, and why:
- `metadata`: OpenAI keeps it with a stored completion for the dashboard; it never reaches the
  model. Agentix has no such store for chat completions (a response echoes it back).
- `prompt_cache_key`: a routing hint for the provider's prompt cache — it changes where the
  prompt is cached, never what is answered. Agentix's own chain decides the provider.
- `prediction`: predicted output only makes an answer come sooner; the answer is the same.
- `service_tier` `auto`/`default`: Agentix's own queue decides when a run is served, as the
  default tier does. `flex`, `scale` and `priority` promise something else: refused.
- `stream_options.include_obfuscation`: padding against a side channel; the tokens are the same."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from fastapi import Request
from pydantic import ValidationError

from services.gateway.problems import ApiProblem
from services.gateway.routing import query_unread
from shared.contract.sampling import Sampling

SERVED_TIERS: Final = (None, "auto", "default")
MAX_METADATA: Final = 16  # OpenAI's limits on `metadata`
MAX_METADATA_KEY: Final = 64
MAX_METADATA_VALUE: Final = 512


def unsupported(param: str, why: str) -> ApiProblem:
    return ApiProblem(400, "Bad Request", f"`{param}` is not supported: {why}",
                      errors=[{"code": "unsupported_parameter", "message": why, "field": param}])


def invalid(param: str, message: str) -> ApiProblem:
    return ApiProblem(400, "Bad Request", f"`{param}`: {message}",
                      errors=[{"code": "invalid_value", "message": message, "field": param}])


def refuse_unknown(extra: Mapping[str, Any] | None) -> None:
    """A parameter the request model does not declare: a 400 naming it, as OpenAI's own API
    answers (`Unrecognized request argument supplied`)."""
    for param in extra or {}:
        message = f"Unrecognized request argument supplied: {param}"
        raise ApiProblem(400, "Bad Request", message,
                         errors=[{"code": "unknown_parameter", "message": message, "field": param}])


def sampling_of(given: Mapping[str, Any], names: Mapping[str, str] | None = None) -> Sampling | None:
    """The sampling choices the request set (None when none), checked with OpenAI's ranges; a
    bad value is a 400 naming the request's parameter (`names`: a field's name in the request
    where it differs, e.g. `reasoning.effort`)."""
    chosen = {k: v for k, v in given.items() if v is not None}
    if not chosen:
        return None
    try:
        return Sampling.model_validate(chosen)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else next(iter(chosen))
        param = (names or {}).get(field, field)
        raise invalid(param, str(first["msg"]).removeprefix("Value error, ")) from exc


def check_metadata(metadata: Mapping[str, Any] | None) -> None:
    """OpenAI's shape: at most 16 string pairs, keys up to 64 characters, values up to 512."""
    if metadata is None:
        return
    if len(metadata) > MAX_METADATA:
        raise invalid("metadata", f"at most {MAX_METADATA} pairs")
    for key, value in metadata.items():
        if len(key) > MAX_METADATA_KEY or not isinstance(value, str) or len(value) > MAX_METADATA_VALUE:
            raise invalid(f"metadata.{key}", f"keys up to {MAX_METADATA_KEY} characters, string values up to "
                                             f"{MAX_METADATA_VALUE}")


def check_service_tier(tier: str | None) -> None:
    if tier not in SERVED_TIERS:
        raise unsupported("service_tier", f"`{tier}` is a provider's processing tier; Agentix serves every "
                                          "request on its own queue: send `auto` or `default`.")


def refuse_set(given: Iterable[tuple[str, Any, str]]) -> None:
    """The first `(param, value, why)` whose value is set (not None, not empty): a 400 naming it."""
    for param, value, why in given:
        if value not in (None, False, [], {}):
            raise unsupported(param, why)


async def known_query(request: Request) -> None:
    """A query parameter the route does not read: a 400 naming it, as an unknown body field is."""
    unknown = query_unread(request)
    if unknown is not None:
        refuse_unknown({unknown: True})
