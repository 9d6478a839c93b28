"""Admin API for external MCP servers (`/api/v1/admin/mcp-servers`, admins only): each change
is written to the database, then published on the control plane for the MCP bridges."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from services.gateway.admin import mcp_servers as mcp_svc
from services.gateway.deps import AdminUser, DatabaseDep, SettingsDep, get_publisher
from services.gateway.pagination import Cursor, Limit, Page

router = APIRouter(prefix="/api/v1/admin/mcp-servers", tags=["admin"])


@router.get("", response_model=Page)
async def list_mcp_servers(_: AdminUser, db: DatabaseDep, limit: Limit = 50, cursor: Cursor = None) -> Page:
    return await db.run(mcp_svc.list_page, limit, cursor)


@router.post("", status_code=201)
async def create_mcp_server(
    body: mcp_svc.McpServerIn, request: Request, admin: AdminUser, db: DatabaseDep, settings: SettingsDep
) -> dict[str, Any]:
    out = await db.run(mcp_svc.create, body, settings.persistent_secret("secret_key"), admin.id)
    request.state.audit_target = f"mcp_server={out['name']}"
    await get_publisher(request).publish_mcp_servers()
    return out


@router.get("/{server_id}")
async def get_mcp_server(server_id: str, _: AdminUser, db: DatabaseDep) -> dict[str, Any]:
    return await db.run(mcp_svc.get, server_id)


@router.put("/{server_id}")
async def update_mcp_server(
    server_id: str,
    body: mcp_svc.McpServerIn,
    request: Request,
    admin: AdminUser,
    db: DatabaseDep,
    settings: SettingsDep,
) -> dict[str, Any]:
    out = await db.run(mcp_svc.update, server_id, body, settings.persistent_secret("secret_key"), admin.id)
    request.state.audit_target = f"mcp_server={out['name']}"
    await get_publisher(request).publish_mcp_servers()
    return out


@router.delete("/{server_id}", status_code=204, response_class=Response)
async def delete_mcp_server(server_id: str, request: Request, admin: AdminUser, db: DatabaseDep) -> Response:
    await db.run(mcp_svc.delete, server_id, admin.id)
    request.state.audit_target = f"mcp_server_id={server_id}"
    await get_publisher(request).publish_mcp_servers()
    return Response(status_code=204)
