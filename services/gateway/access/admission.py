"""Who may call, how often, and what they may say: the bearer token, the per-user rate limit and
the tier-1 guardrail, with the problems each answers. The API applies them as middleware under
`/api/v1`; the facades beside it (`/mcp`, `/lg`, `/v1`) apply them through `admit` and
`check_text`. One place, so the doors of the gateway cannot drift apart."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.datastructures import State
from starlette.types import Scope

from services.gateway.access.api_keys import is_api_key
from services.gateway.access.auth import AuthError, VerifiedTokens, bearer_of, principal_from_header
from services.gateway.access.guardrail import Verdict
from services.gateway.access.key_auth import KeyVerifier
from services.gateway.access.principal import Principal
from services.gateway.access.ratelimit import Decision, RateLimiter
from services.gateway.audit import write_guardrail_event
from services.gateway.middleware.common import route_template, state
from services.gateway.problems import ApiProblem
from shared.settings import GatewaySettings


def unauthorized(exc: AuthError) -> ApiProblem:
    return ApiProblem(401, "Unauthorized", exc.detail, headers={"WWW-Authenticate": "Bearer"})


def over_limit(limiter: RateLimiter, decision: Decision) -> ApiProblem:
    return ApiProblem(429, "Too Many Requests",
                      f"Rate limit of {limiter.limit} requests per minute reached; retry later.",
                      headers={"Retry-After": str(decision.retry_after_s)})


def blocked(verdict: Verdict, what: str) -> ApiProblem:
    """`what` names the guarded text in the sentence ("task input", "run's input")."""
    return ApiProblem(400, "Input blocked by guardrail",
                      f"The {what} was blocked by the input guardrail ({verdict.reason}).",
                      errors=[{"code": "guardrail_blocked", "message": rule} for rule in verdict.rules])


def out_of_scope(principal: Principal, scopes: tuple[str, ...]) -> ApiProblem:
    held = ", ".join(sorted(principal.scopes or ())) or "none"
    return ApiProblem(403, "Forbidden", f"This API key's scopes ({held}) do not include {' or '.join(scopes)}.",
                      type_="insufficient_scope")


async def authenticate(settings: GatewaySettings, verified: VerifiedTokens, keys: KeyVerifier,
                       authorization: str | None, scopes: tuple[str, ...]) -> Principal:
    """The one authentication of every door: `Authorization: Bearer <jwt or API key>` → the
    principal (AuthError: 401); an API key must hold one of the door's `scopes` (403)."""
    if not settings.auth_disabled and is_api_key(bearer_of(authorization)):
        principal = await keys.principal(bearer_of(authorization))
        if not principal.allows(*scopes):
            raise out_of_scope(principal, scopes)
        return principal
    return principal_from_header(settings, authorization, verified)


async def admit(st: State, scope: Scope, authorization: str | None, scopes: tuple[str, ...]) -> Principal:
    """The caller of a request outside `/api/v1`: token or API key verified (401), the key's
    scopes open this door (`scopes`, 403), within its rate limit (429), and named in the
    request's state for the audit row."""
    try:
        principal = await authenticate(st.settings, st.verified_tokens, st.api_keys, authorization, scopes)
    except AuthError as exc:
        raise unauthorized(exc) from exc
    state(scope)["principal"] = principal
    decision = await st.limiter.hit(f"user:{principal.id}")
    if not decision.allowed:
        raise over_limit(st.limiter, decision)
    return principal


async def record_verdict(st: State, scope: Scope, verdict: Verdict) -> None:
    """A guardrail verdict that was not `allow`, as a guardrail-event row."""
    principal = state(scope).get("principal")
    await write_guardrail_event(
        st.db,
        user_id=principal.id if principal else None,
        tier=1,
        action="block" if verdict.action == "block" else "flag",
        rule=",".join(verdict.rules)[:100],
        reason=verdict.reason,
        route=route_template(scope) if scope.get("route") else str(scope.get("path", ""))[:300],
        request_id=state(scope).get("request_id"),
    )


async def check_text(st: State, scope: Scope, texts: Iterable[str], what: str) -> list[str]:
    """The tier-1 guardrail on what a user wrote: a block raises (400), a grey verdict's rules are
    returned for the run's task (empty when clean); either is recorded."""
    verdict = st.guardrail.check(texts)
    if verdict.action == "allow":
        return []
    await record_verdict(st, scope, verdict)
    if verdict.action == "block":
        raise blocked(verdict, what)
    return list(verdict.rules)

