"""One call to an inbound webhook (`POST /hooks/{id}`): the hook found and enabled, the call
within the hook's rate and the body limit, its signature checked (Standard Webhooks, or GitHub's
`X-Hub-Signature-256`), its input mapped, and a task of the hook's workflow submitted as the
hook's owner. The delivery id (`webhook-id`, or GitHub's `X-GitHub-Delivery`) is the task's
idempotency key: a call replayed with the same id starts nothing and is answered 409 with the
task the first one started. Each refusal says why and starts nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, col
from starlette.requests import Request

from services.gateway.access.admission import check_text
from services.gateway.access.principal import Principal
from services.gateway.problems import ApiProblem
from services.gateway.runs import submit as svc
from services.gateway.tables import User, now
from services.gateway.triggers.hooks import not_found
from services.gateway.triggers.mapping import MappingError, map_input
from services.gateway.triggers.signing import SignatureRefused, verify, verify_github
from services.gateway.triggers.tables import Hook
from shared.secrets import decrypt_secret
from shared.settings import GatewaySettings


@dataclass(frozen=True)
class Accepted:
    task: Any
    queued: bool
    delivery_id: str


def _hook_and_owner(session: Session, hook_id: str, admins: list[str]) -> tuple[Hook, Principal]:
    hook = session.get(Hook, hook_id)
    if hook is None:
        raise not_found(hook_id)
    if not hook.enabled:
        raise ApiProblem(409, "Hook disabled", f"Hook {hook_id!r} is disabled: the call starts nothing.")
    user = session.get(User, hook.user_id)
    if user is not None and user.disabled:
        raise ApiProblem(403, "Forbidden", "The hook's owner is disabled: the call starts nothing.")
    is_admin = hook.user_id in admins or (user is not None and user.is_admin)
    return hook, Principal(id=hook.user_id, is_admin=is_admin)


def _count_call(session: Session, hook_id: str) -> None:
    session.execute(update(Hook).where(col(Hook.id) == hook_id)
                    .values(calls=Hook.calls + 1, last_called_at=now()))  # fmt: skip


async def _body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiProblem(413, "Payload Too Large", f"A hook call's body may be at most {limit} bytes.")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiProblem(413, "Payload Too Large", f"A hook call's body may be at most {limit} bytes.")
        chunks.append(chunk)
    return b"".join(chunks)


def _delivery_id(hook: Hook, secret: str, headers: Mapping[str, str], body: bytes) -> str:
    """The call's delivery id once its signature holds (401 naming the failed check otherwise)."""
    try:
        if hook.signature == "github":
            verify_github(secret, headers, body)
            delivery = headers.get("x-github-delivery")
            if not delivery:
                raise SignatureRefused("missing X-GitHub-Delivery header (the delivery id replays are known by)")
            return delivery
        return verify(secret, headers, body, int(time.time()))
    except SignatureRefused as exc:
        raise ApiProblem(401, "Bad webhook signature", f"{exc.reason}: the call starts nothing.",
                         type_="webhook-signature") from None


def _input(hook: Hook, body: bytes, request: Request) -> dict[str, Any]:
    try:
        parsed: Any = json.loads(body) if body.strip() else {}
    except ValueError:
        raise ApiProblem(415, "Unsupported Media Type", "A hook call's body must be JSON.") from None
    mapping = hook.input_mapping or {}
    if not mapping:
        if not isinstance(parsed, dict):
            raise ApiProblem(422, "Invalid request",
                             "The hook has no input mapping, so its body must be a JSON object (the workflow input).")
        return parsed
    try:
        return map_input(mapping, parsed, dict(request.headers), dict(request.query_params))
    except MappingError as exc:
        raise ApiProblem(422, "Invalid request", str(exc), type_="hook-mapping") from None


async def receive(request: Request, hook_id: str) -> Accepted:
    st = request.app.state
    settings: GatewaySettings = st.settings
    hook, owner = await st.db.run(_hook_and_owner, hook_id, list(settings.admin_users))
    decision = await st.hook_limiter.hit(f"hook:{hook.id}")
    if not decision.allowed:
        raise ApiProblem(429, "Too Many Requests",
                         f"Hook {hook.id!r} takes at most {settings.hook_rate_limit_per_min} calls per minute.",
                         headers={"Retry-After": str(decision.retry_after_s)})
    body = await _body(request, settings.hook_body_max_bytes)
    secret = decrypt_secret(hook.secret_enc, settings.persistent_secret("secret_key"))
    delivery_id = _delivery_id(hook, secret, request.headers, body)
    if not 1 <= len(delivery_id) <= 200:
        raise ApiProblem(400, "Bad Request", "The delivery id must be 1 to 200 characters.")
    task_input = _input(hook, body, request)
    grey = await check_text(st, request.scope, [json.dumps(task_input, ensure_ascii=False)], "hook call's input")
    submit = svc.SubmitTask(workflow_id=hook.workflow_id, input=task_input, webhook=hook.webhook)
    trigger = {"kind": "hook", "id": hook.id, "delivery_id": delivery_id}
    task, created, queued = await svc.submit(st.db, st.bus, owner, submit, f"hook:{hook.id}:{delivery_id}", grey,
                                             trigger=trigger)
    if not created:
        raise ApiProblem(409, "Replayed webhook",
                         f"Delivery {delivery_id!r} was already accepted (task {task.id}): the call starts nothing.",
                         type_="webhook-replay", extensions={"task_id": task.id})
    await st.db.run(_count_call, hook.id)
    return Accepted(task=task, queued=queued, delivery_id=delivery_id)
