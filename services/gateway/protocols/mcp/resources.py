"""What an MCP client may read of the caller's Agentix: `resources/list` (their workflows,
conversations and reports, a page at a time), `resources/templates/list` (those and knowledge-base
documents, `agentix://kb/{kb}/{doc}`) and `resources/read`.

Like MCP tool calls, reading acts as the token's user without admin rights: an admin's client
sees the admin's own things. Workflows and conversations are the gateway's own records; KB
documents and reports belong to tools_go_equiv and are read over NATS through its tools, a report
in another format than markdown as a blob from the object store."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from fastapi import FastAPI
from mcp.shared.exceptions import MCPError

from services.gateway import workflows
from services.gateway.access.principal import Principal
from services.gateway.chat import conversations, messages
from services.gateway.problems import ApiProblem
from services.gateway.protocols.mcp.caller import RESOURCE_NOT_FOUND
from shared.bus.tools import ToolClient
from shared.contract.tools import ToolMeta

SCHEME = "agentix://"
PAGE = 50
TRANSCRIPT_MESSAGES = 2000  # the most recent ones a transcript resource carries
FORMATS = {"md": "text/markdown", "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
           "pdf": "application/pdf"}  # fmt: skip
# The sources `resources/list` walks, in order; its cursor says which one and where in it.
SOURCES = ("workflows", "conversations", "reports")

TEMPLATES = [
    types.ResourceTemplate(name="workflow", title="A saved workflow's DSL", uri_template="agentix://workflows/{id}",
                           mime_type="application/json"),
    types.ResourceTemplate(name="kb-document", title="A knowledge-base document's text",
                           uri_template="agentix://kb/{kb}/{doc}", mime_type="text/plain"),
    types.ResourceTemplate(name="conversation", title="A conversation's transcript",
                           uri_template="agentix://conversations/{id}", mime_type="text/markdown"),
    types.ResourceTemplate(name="report", title="A report, as md (text), docx or pdf (blob)",
                           uri_template="agentix://reports/{id}/{format}"),
]  # fmt: skip


@dataclass(frozen=True)
class Position:
    source: int
    inner: str | None


def encode(position: Position) -> str:
    raw = json.dumps([position.source, position.inner]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str | None) -> Position:
    if not cursor:
        return Position(0, None)
    try:
        source, inner = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(source, int) or not 0 <= source < len(SOURCES) or not isinstance(inner, str | None):
            raise ValueError(cursor)
    except (ValueError, TypeError, binascii.Error) as exc:
        raise MCPError(types.INVALID_PARAMS, "The cursor is not valid.") from exc
    return Position(source, inner)


def not_found(uri: str, why: str = "") -> MCPError:
    return MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}{' (' + why + ')' if why else ''}",
                    data={"uri": uri})  # fmt: skip


class McpResources:
    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self._client: ToolClient | None = None

    async def _go(self, who: Principal, tool: str, args: dict[str, Any], uri: str) -> Any:
        """A tools_go_equiv tool as the caller; its failure the resource's error."""
        bus = getattr(self.app.state, "bus", None)
        if bus is None or not bus.nc.is_connected:
            raise MCPError(types.INTERNAL_ERROR, "The message bus is not connected; try again shortly.")
        if self._client is None or self._client.bus is not bus:
            self._client = ToolClient(bus, services=("go",))
        reply = await self._client.call(tool, {**args, "user_id": who.id}, ToolMeta(user_id=who.id))
        if reply.ok:
            return reply.result
        code, message = (reply.error.code, reply.error.message) if reply.error else ("error", "the tool failed")
        if code in ("not_found", "forbidden"):
            raise not_found(uri, message)
        raise MCPError(types.INTERNAL_ERROR, f"{uri}: {code}: {message}")

    async def _page(self, who: Principal, source: str, inner: str | None) -> tuple[list[types.Resource], str | None]:
        db = self.app.state.db
        if source == "workflows":
            page = await db.run(workflows.list_page, who, PAGE, inner)
            return [types.Resource(uri=f"{SCHEME}workflows/{w['id']}", name=w["name"], title=w["name"],
                                   description="A saved workflow's DSL", mime_type="application/json")
                    for w in page.items], page.next_cursor  # fmt: skip
        if source == "conversations":
            page = await db.run(conversations.list_page, who, PAGE, inner)
            return [types.Resource(uri=f"{SCHEME}conversations/{c['id']}", name=c["title"] or c["id"],
                                   title=c["title"], description="A conversation's transcript",
                                   mime_type="text/markdown") for c in page.items], page.next_cursor  # fmt: skip
        out = await self._go(who, "report_list", {"limit": PAGE, "cursor": inner}, f"{SCHEME}reports")
        return [types.Resource(uri=f"{SCHEME}reports/{r['id']}/md", name=r["title"] or r["id"], title=r["title"],
                               description="A report (also as docx and pdf: agentix://reports/{id}/{format})",
                               mime_type="text/markdown") for r in out["items"]], out.get("next_cursor")  # fmt: skip

    async def listing(self, who: Principal, cursor: str | None) -> types.ListResourcesResult:
        at = decode(cursor)
        found, inner = await self._page(who, SOURCES[at.source], at.inner)
        if inner is not None:
            return types.ListResourcesResult(resources=found, next_cursor=encode(Position(at.source, inner)))
        following = at.source + 1
        nxt = encode(Position(following, None)) if following < len(SOURCES) else None
        return types.ListResourcesResult(resources=found, next_cursor=nxt)

    async def read(self, who: Principal, uri: str) -> types.ReadResourceResult:
        parts = uri.removeprefix(SCHEME).split("/") if uri.startswith(SCHEME) else []
        match parts:
            case ["workflows", wf_id] if wf_id:
                try:
                    wf = await self.app.state.db.run(workflows.get, who, wf_id)
                except ApiProblem as problem:
                    raise not_found(uri) from problem
                text = json.dumps(wf["dsl"], ensure_ascii=False, indent=2)
                return _text(uri, "application/json", text)
            case ["conversations", conv_id] if conv_id:
                return _text(uri, "text/markdown", await self._transcript(who, conv_id, uri))
            case ["kb", kb, doc] if kb and doc:
                out = await self._go(who, "doc_text", {"kb": kb, "doc_id": doc}, uri)
                return _text(uri, "text/plain", out["text"])
            case ["reports", report_id, fmt] if report_id and fmt in FORMATS:
                return await self._report(who, report_id, fmt, uri)
        raise not_found(uri, "not an Agentix resource URI; see resources/templates/list")

    async def _transcript(self, who: Principal, conversation_id: str, uri: str) -> str:
        def load(session: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
            conversation = conversations.view(conversations.load_owned(session, who, conversation_id))
            page = messages.list_page(session, conversation_id, TRANSCRIPT_MESSAGES, None, newest_first=True)
            return conversation, list(reversed(page.items))

        try:
            conversation, said = await self.app.state.db.run(load)
        except ApiProblem as problem:
            raise not_found(uri) from problem
        lines = [f"# {conversation['title'] or conversation_id}", ""]
        lines += [f"**{m['role']}**: {m['content']}\n" for m in said]
        return "\n".join(lines)

    async def _report(self, who: Principal, report_id: str, fmt: str, uri: str) -> types.ReadResourceResult:
        out = await self._go(who, "report_export", {"report_id": report_id, "format": fmt}, uri)
        store = await self.app.state.bus.object_store(out["bucket"])
        data = (await store.get(out["object"])).data or b""
        if fmt == "md":
            return _text(uri, FORMATS[fmt], data.decode("utf-8", "replace"))
        blob = types.BlobResourceContents(uri=uri, mime_type=FORMATS[fmt], blob=base64.b64encode(data).decode())
        return types.ReadResourceResult(contents=[blob])

    async def complete(self, who: Principal, uri_template: str, name: str, value: str,
                       context: dict[str, str]) -> list[str]:  # fmt: skip
        """Values for a template's variable that start with what the client typed."""
        found: list[str] = []
        if uri_template.startswith(f"{SCHEME}reports/") and name == "format":
            found = list(FORMATS)
        elif uri_template.startswith(f"{SCHEME}kb/") and name == "kb":
            found = [kb["name"] for kb in (await self._go(who, "kb_list", {}, uri_template))["items"]]
        elif uri_template.startswith(f"{SCHEME}kb/") and name == "doc" and context.get("kb"):
            out = await self._go(who, "doc_list", {"kb": context["kb"], "limit": 200}, uri_template)
            found = [d["id"] for d in out["items"]]
        elif name == "id":
            source = uri_template.removeprefix(SCHEME).split("/", 1)[0]
            if source in SOURCES:
                found = [r.uri.removeprefix(SCHEME).split("/")[1] for r in (await self._page(who, source, None))[0]]
        return [v for v in found if v.startswith(value)]


def _text(uri: str, mime_type: str, text: str) -> types.ReadResourceResult:
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=mime_type, text=text)])
