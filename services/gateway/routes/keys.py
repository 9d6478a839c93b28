"""`/api/v1/keys` (thin): the caller's API keys — make one (shown once), list them, revoke one
(refused at once on every gateway replica: `access/key_revocations.py`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from services.gateway.access import api_keys
from services.gateway.deps import CurrentUser, DatabaseDep, SettingsDep

router = APIRouter(prefix="/api/v1/keys", tags=["keys"])


@router.post("", status_code=201)
async def create_key(body: api_keys.KeyCreate, request: Request, user: CurrentUser, db: DatabaseDep,
                     settings: SettingsDep) -> dict[str, Any]:
    out = await db.run(api_keys.create, settings, user, body)
    request.state.audit_target = f"key={out['id']}"
    return out


@router.get("")
async def list_keys(request: Request, user: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    await request.app.state.api_keys.flush()  # this replica's last uses, so the list shows them
    return {"items": await db.run(api_keys.list_keys, user.id)}


@router.delete("/{key_id}")
async def revoke_key(key_id: str, request: Request, user: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    row = await db.run(api_keys.revoke, user, key_id)
    request.state.audit_target = f"key={key_id}"
    st = request.app.state
    if st.key_revocations is not None and st.bus is not None and st.bus.nc.is_connected:
        confirmed = await st.key_revocations.broadcast(key_id)
    else:  # no bus: this replica forgets it now, the others within their cache's lifetime
        st.api_keys.drop(key_id)
        confirmed = []
    return {**api_keys.view(row), "gateways_confirmed": len(confirmed)}
