"""Reports: store Markdown, render .docx/.pdf, export (a link the gateway streams from the
object store). The files live in the `reports` object store bucket; rows keep who owns what."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Literal

from pydantic import Field
from sqlalchemy import Connection, delete, insert, select, update

from services.tools_go_equiv import objects, runtime
from services.tools_go_equiv.db.schema import reports
from services.tools_go_equiv.ids import iso, new_id, now
from services.tools_go_equiv.registry import ADDS, ADDS_ONCE, DELETES, READS, registry
from services.tools_go_equiv.reports.render import MEDIA_TYPES, render
from services.tools_go_equiv.tools.common import Caller, Page, UserArgs, caller_of, user_of
from shared.bus.tools import ToolContext, ToolFailure

Format = Literal["md", "docx", "pdf"]
# A tool request is one NATS message (1 MiB by default), arguments included.
MAX_MARKDOWN = 900 * 1024


def object_name(report_id: str, fmt: str) -> str:
    return f"reports/{report_id}/report.{fmt}"


def filename(title: str, fmt: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", title).strip("-.")[:80] or "report"
    return f"{stem}.{fmt}"


def _public(row: Any) -> dict[str, Any]:
    files = json.loads(row.files)
    base = runtime.get().settings.kb_api_base.rstrip("/")
    return {
        "id": row.id,
        "user_id": row.user_id,
        "title": row.title,
        "task_id": row.task_id,
        "formats": sorted(files),
        "created_at": iso(row.created_at),
        "links": {fmt: f"{base}/reports/{row.id}/export?format={fmt}" for fmt in ("md", "docx", "pdf")},
    }


def _get(conn: Connection, owner: str | None, report_id: str) -> Any:
    """The report, if `owner` owns it (owner None: whoever does)."""
    q = select(reports).where(reports.c.id == report_id)
    if owner is not None:
        q = q.where(reports.c.user_id == owner)
    return conn.execute(q).first()


def _add_file(conn: Connection, report_id: str, fmt: str, name: str, size: int) -> None:
    row = conn.execute(select(reports.c.files).where(reports.c.id == report_id).with_for_update()).first()
    files = json.loads(row.files) if row else {}
    files[fmt] = {"object": name, "size": size}
    conn.execute(update(reports).where(reports.c.id == report_id).values(files=json.dumps(files), updated_at=now()))


class StoreArgs(UserArgs):
    title: str = Field(min_length=1, max_length=300)
    content: str = Field(min_length=1, description="the report in Markdown")


@registry.tool(
    name="report_store",
    title="Save a report",
    description="Save a Markdown report; it can then be rendered to .docx/.pdf and downloaded.",
    inject=("user_id",),
    annotations=ADDS,
)
async def report_store(args: StoreArgs, ctx: ToolContext) -> dict[str, Any]:
    user = user_of(args, ctx)
    data = args.content.encode("utf-8")
    if len(data) > MAX_MARKDOWN:
        raise ToolFailure("too_large", f"report is larger than {MAX_MARKDOWN} bytes")
    rt = runtime.get()
    report_id = new_id("rep")
    name = object_name(report_id, "md")
    bucket = await objects.reports(rt.bus)
    await bucket.put(name, data)
    ts = now()
    files = json.dumps({"md": {"object": name, "size": len(data)}})

    def write(conn: Connection) -> Any:
        conn.execute(
            insert(reports).values(
                id=report_id,
                user_id=user,
                title=args.title,
                task_id=ctx.meta.task_id,
                files=files,
                created_at=ts,
                updated_at=ts,
            )
        )
        return _get(conn, user, report_id)

    return _public(await rt.db.run(write))


class ReportRefArgs(UserArgs):
    report_id: str = Field(min_length=1, max_length=100)


class RenderArgs(ReportRefArgs):
    format: Format = "pdf"


async def _ensure(caller: Caller, report_id: str, fmt: str) -> tuple[Any, dict[str, Any]]:
    """The report row and the stored file of `fmt`, rendering it from the Markdown if needed."""
    rt = runtime.get()
    row = await rt.db.read(_get, caller.scope, report_id)
    if row is None:
        raise ToolFailure("not_found", f"report {report_id!r} not found")
    files = json.loads(row.files)
    if fmt in files:
        return row, files[fmt]
    bucket = await objects.reports(rt.bus)
    markdown = (await objects.read_all(bucket, files["md"]["object"])).decode("utf-8")
    data = await asyncio.to_thread(render, fmt, row.title, markdown)
    name = object_name(report_id, fmt)
    await bucket.put(name, data)
    await rt.db.run(_add_file, report_id, fmt, name, len(data))
    return row, {"object": name, "size": len(data)}


@registry.tool(
    name="report_render",
    title="Render a report",
    description="Render a saved Markdown report to .docx or .pdf (kept for download).",
    inject=("user_id",),
    annotations=ADDS_ONCE,
)
async def report_render(args: RenderArgs, ctx: ToolContext) -> dict[str, Any]:
    _, file = await _ensure(caller_of(args, ctx), args.report_id, args.format)
    return {"report_id": args.report_id, "format": args.format, "size": file["size"]}


@registry.tool(
    name="report_export",
    title="Download link for a report",
    description="A download link for a report as md, docx or pdf (rendered on demand).",
    inject=("user_id",),
    annotations=ADDS_ONCE,
)
async def report_export(args: RenderArgs, ctx: ToolContext) -> dict[str, Any]:
    row, file = await _ensure(caller_of(args, ctx), args.report_id, args.format)
    rt = runtime.get()
    return {
        "report_id": row.id,
        "format": args.format,
        "url": f"{rt.settings.kb_api_base.rstrip('/')}/reports/{row.id}/export?format={args.format}",
        "filename": filename(row.title, args.format),
        "media_type": MEDIA_TYPES[args.format],
        "bucket": rt.bus.names.reports_bucket,
        "object": file["object"],
        "size": file["size"],
    }


class ReportListArgs(UserArgs, Page):
    pass


def _list(conn: Connection, owner: str | None, limit: int, cursor: str | None) -> tuple[list[Any], str | None]:
    q = select(reports).order_by(reports.c.id.desc()).limit(limit + 1)
    if owner is not None:
        q = q.where(reports.c.user_id == owner)
    if cursor:
        q = q.where(reports.c.id < cursor)
    rows = conn.execute(q).all()
    return list(rows[:limit]), rows[limit - 1].id if len(rows) > limit else None


@registry.tool(
    name="report_list",
    title="List reports",
    description="The caller's reports, newest first.",
    agent=False,
    inject=("user_id",),
    annotations=READS,
)
async def report_list(args: ReportListArgs, ctx: ToolContext) -> dict[str, Any]:
    rows, cursor = await runtime.get().db.read(_list, caller_of(args, ctx).scope, args.limit, args.cursor)
    return {"items": [_public(r) for r in rows], "next_cursor": cursor}


def _delete(conn: Connection, owner: str | None, report_id: str) -> Any:
    row = _get(conn, owner, report_id)
    if row is not None:
        conn.execute(delete(reports).where(reports.c.id == report_id))
    return row


@registry.tool(
    name="report_delete",
    title="Delete a report",
    description="Delete a report with every rendered file of it.",
    agent=False,
    inject=("user_id",),
    annotations=DELETES,
)
async def report_delete(args: ReportRefArgs, ctx: ToolContext) -> dict[str, Any]:
    rt = runtime.get()
    row = await rt.db.run(_delete, caller_of(args, ctx).scope, args.report_id)
    if row is None:
        raise ToolFailure("not_found", f"report {args.report_id!r} not found")
    # The row is gone first: a file left behind by a failed delete is unreachable, never listed.
    bucket = await objects.reports(rt.bus)
    for file in json.loads(row.files).values():
        await objects.delete_quietly(bucket, file["object"])
    return {"deleted": row.id, "title": row.title, "user_id": row.user_id}
