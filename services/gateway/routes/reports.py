"""Reports: list, delete, and export as md/docx/pdf streamed from the object store chunk by chunk (a
bounded pull consumer: memory stays flat whatever the file size or the client's speed). Admins
list and export every user's reports (the tools apply the rule; items carry `user_id`)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from services.gateway.deps import BusDep, CurrentUser
from services.gateway.go_tools import call_go_tool
from services.gateway.pagination import Cursor, Limit, decode_cursor, encode_cursor
from services.gateway.problems import ApiProblem
from shared.bus import Bus

router = APIRouter(prefix="/api/v1/reports", tags=["reports"])
log = logging.getLogger("agentix.gateway.reports")
FETCH_CHUNKS = 8  # object store chunks are 128 KiB: at most ~1 MiB in flight per download


@router.get("")
async def list_reports(user: CurrentUser, bus: BusDep, limit: Limit = 50, cursor: Cursor = None) -> dict[str, Any]:
    raw = decode_cursor(cursor) if cursor else None
    out = await call_go_tool(bus, user, "report_list", {"limit": limit, "cursor": raw})
    nxt = out.get("next_cursor")
    return {"items": out["items"], "next_cursor": encode_cursor(nxt) if nxt else None}


async def _chunks(bus: Bus, bucket: str, nuid: str, size: int, digest: str | None) -> AsyncIterator[bytes]:
    stream = f"OBJ_{bucket}"
    sub = await bus.js.pull_subscribe(
        f"$O.{bucket}.C.{nuid}",
        stream=stream,
        config=ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL, inactive_threshold=60.0),
    )
    sha = hashlib.sha256()
    sent = 0
    try:
        while sent < size:
            try:
                msgs = await sub.fetch(FETCH_CHUNKS, timeout=10)
            except (NatsTimeout, TimeoutError):
                log.warning("report download stalled at %d/%d bytes", sent, size)
                return
            for msg in msgs:
                sha.update(msg.data)
                sent += len(msg.data)
                yield msg.data
        if digest and sha.digest().hex() != _digest_hex(digest):
            log.error("report %s/%s: digest mismatch", bucket, nuid)
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()


def _digest_hex(digest: str) -> str:
    return base64.urlsafe_b64decode(digest.split("=", 1)[1] + "==").hex()


@router.get(
    "/{report_id}/export",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/pdf": {}, "text/markdown": {}, "application/octet-stream": {}}}},
)
async def export(
    report_id: str,
    user: CurrentUser,
    bus: BusDep,
    fmt: Annotated[Literal["md", "docx", "pdf"], Query(alias="format")] = "md",
) -> StreamingResponse:
    out = await call_go_tool(bus, user, "report_export", {"report_id": report_id, "format": fmt}, 120)
    try:
        store = await bus.object_store(out["bucket"])
        info = await store.get_info(out["object"])
    except NotFoundError as exc:
        raise ApiProblem(404, "Not Found", f"the {fmt} file of report {report_id} is gone") from exc
    size = int(info.size or 0)
    ascii_name = out["filename"].encode("ascii", "replace").decode().replace('"', "")
    headers = {
        "Content-Disposition": f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(out['filename'])}",
        "Content-Length": str(size),
        "Cache-Control": "private, no-cache",
    }
    return StreamingResponse(
        _chunks(bus, out["bucket"], info.nuid or "", size, info.digest), media_type=out["media_type"], headers=headers
    )


@router.delete("/{report_id}")
async def delete_report(report_id: str, request: Request, user: CurrentUser, bus: BusDep) -> dict[str, Any]:
    request.state.audit_target = f"report={report_id}"
    return await call_go_tool(bus, user, "report_delete", {"report_id": report_id})
