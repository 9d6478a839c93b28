"""Inbound webhooks' records: `/api/v1/hooks` — make a hook for a workflow (its secret shown
once), list, read, change, delete. A hook is its creator's (admins see all); the secret is kept
encrypted with the deployment's key, since every call's HMAC is checked with it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlmodel import Session, col, select

from services.gateway.access.principal import Principal
from services.gateway.ids import new_id
from services.gateway.problems import ApiProblem
from services.gateway.tables import Workflow, now
from services.gateway.triggers.mapping import MappingError, check_mapping
from services.gateway.triggers.signing import new_secret
from services.gateway.triggers.tables import Hook
from shared.secrets import encrypt_secret

Signature = Literal["standard", "github"]


def _mapping(value: dict[str, str] | None) -> dict[str, str] | None:
    if value is not None:
        try:
            check_mapping(value)
        except MappingError as exc:
            raise ValueError(str(exc)) from None
    return value


class HookCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    workflow_id: str = Field(max_length=64, description="the saved workflow each call starts")
    input_mapping: dict[str, str] = Field(
        default_factory=dict,
        description="workflow input field → path in the call ($.body.a[0].b, $.headers.x, $.query.y); "
                    "empty: the JSON body (an object) is the input")  # fmt: skip
    signature: Signature = Field(default="standard",
                                 description="standard: Standard Webhooks headers; github: X-Hub-Signature-256")
    webhook: str | None = Field(default=None, max_length=2000, description="completion callback of its tasks")
    enabled: bool = True

    _check = field_validator("input_mapping")(_mapping)


class HookPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    input_mapping: dict[str, str] | None = None
    signature: Signature | None = None
    webhook: str | None = Field(default=None, max_length=2000)
    enabled: bool | None = None

    _check = field_validator("input_mapping")(_mapping)


def path_of(hook_id: str) -> str:
    return f"/hooks/{hook_id}"


def view(hook: Hook) -> dict[str, Any]:
    return {
        "id": hook.id, "name": hook.name, "workflow_id": hook.workflow_id, "url": path_of(hook.id),
        "input_mapping": hook.input_mapping or {}, "signature": hook.signature, "webhook": hook.webhook,
        "enabled": hook.enabled, "calls": hook.calls, "last_called_at": hook.last_called_at,
        "owner": hook.user_id, "created_at": hook.created_at, "updated_at": hook.updated_at,
    }  # fmt: skip


def not_found(hook_id: str) -> ApiProblem:
    return ApiProblem(404, "Not Found", f"No hook {hook_id!r}.")


def load_owned(session: Session, user: Principal, hook_id: str) -> Hook:
    hook = session.get(Hook, hook_id)
    if hook is None or not user.can_see(hook.user_id):
        raise not_found(hook_id)  # another user's hook is indistinguishable from none
    return hook


def create(session: Session, user: Principal, body: HookCreate, deployment_secret: str) -> dict[str, Any]:
    workflow = session.get(Workflow, body.workflow_id)
    if workflow is None or not user.can_see(workflow.user_id):
        raise ApiProblem(422, "Invalid request", f"`workflow_id`: no workflow {body.workflow_id!r}.",
                         errors=[{"code": "not_found", "message": "no such workflow", "field": "workflow_id"}])
    secret = new_secret()
    hook = Hook(id=new_id("hk"), user_id=user.id, name=body.name, workflow_id=workflow.id,
                input_mapping=body.input_mapping, secret_enc=encrypt_secret(secret, deployment_secret),
                signature=body.signature, webhook=body.webhook, enabled=body.enabled)  # fmt: skip
    session.add(hook)
    session.flush()
    return view(hook) | {"secret": secret}  # shown this once


def list_hooks(session: Session, user: Principal) -> list[dict[str, Any]]:
    query = select(Hook).order_by(col(Hook.id))
    if not user.is_admin:
        query = query.where(Hook.user_id == user.id)
    return [view(h) for h in session.exec(query)]


def update(session: Session, user: Principal, hook_id: str, body: HookPatch) -> dict[str, Any]:
    hook = load_owned(session, user, hook_id)
    for field in body.model_fields_set:
        if field != "webhook" and getattr(body, field) is None:
            raise ApiProblem(422, "Invalid request", f"`{field}` cannot be null.")
        setattr(hook, field, getattr(body, field))
    hook.updated_at = now()
    session.add(hook)
    session.flush()
    return view(hook)


def delete(session: Session, user: Principal, hook_id: str) -> None:
    session.delete(load_owned(session, user, hook_id))
