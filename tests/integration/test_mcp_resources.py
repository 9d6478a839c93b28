"""`/mcp` resources, prompts and completion with the real MCP SDK client against a real gateway and
the tool services: a workflow's DSL, a KB document's text (read over NATS), a conversation's
transcript, a report as markdown text and as a PDF blob, `resources/list` page by page, the
prompt library with its variables as arguments, completion of template variables, and
`logging/setLevel`. Everything as the token's user: another user's things are not found."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from services.gateway.protocols.mcp import resources as mcp_resources
from shared.auth_tokens import mint_token
from shared.settings import Settings
from tests.integration.test_mcp_server import Mcp
from tests.integration.test_tools_support import tools_and_gateway

DSL: dict[str, Any] = {
    "version": "1",
    "nodes": [
        {"id": "in", "kind": "input"},
        {"id": "out", "kind": "output", "config": {"value": "{{ in.text }}"}},
    ],
    "edges": [{"source": "in", "target": "out"}],
}


@pytest.fixture
async def mcp(settings: Settings) -> AsyncIterator[Mcp]:
    async with tools_and_gateway(settings) as (cfg, _bus, tools, base_url):
        yield Mcp(cfg, base_url.removesuffix("/api/v1"), tools)


def api(mcp: Mcp, user: str, admin: bool = False) -> httpx.AsyncClient:
    token = mint_token(mcp.settings, user, admin=admin)
    return httpx.AsyncClient(base_url=f"{mcp.gateway}/api/v1", headers={"Authorization": f"Bearer {token}"},
                             timeout=30)  # fmt: skip


def text_of(result: types.ReadResourceResult) -> str:
    [content] = result.contents
    assert isinstance(content, types.TextResourceContents)
    return content.text


async def test_workflows_kb_documents_transcripts_and_reports_are_resources(mcp: Mcp) -> None:
    async with api(mcp, "alice") as http:
        saved = await http.post("/workflows", json={"name": "echo", "dsl": DSL})
        assert saved.status_code == 201, saved.text
        wf_id = saved.json()["id"]
        conv = await http.post("/conversations", json={"title": "Trip"})
        assert conv.status_code == 201, conv.text
    await mcp.tools("kb_create", "alice", name="handbook")
    added = await mcp.tools("kb_ingest", "alice", kb="handbook", title="Travel",
                            text="Book trains for journeys under four hours.")  # fmt: skip
    assert (await mcp.tools.wait_job(added["job_id"])).status == "done"
    report = await mcp.tools("report_store", "alice", title="Q3", content="# Q3\n\nSales went up.")

    async with mcp.session("alice") as alice, mcp.session("bob") as bob:
        listed = await alice.list_resources()
        uris = {r.uri for r in listed.resources}
        while listed.next_cursor:
            listed = await alice.list_resources(params=types.PaginatedRequestParams(cursor=listed.next_cursor))
            uris |= {r.uri for r in listed.resources}
        assert {f"agentix://workflows/{wf_id}", f"agentix://conversations/{conv.json()['id']}",
                f"agentix://reports/{report['id']}/md"} <= uris  # fmt: skip

        dsl = json.loads(text_of(await alice.read_resource(f"agentix://workflows/{wf_id}")))
        assert dsl == DSL
        doc_id = added["document_id"]
        doc = text_of(await alice.read_resource(f"agentix://kb/handbook/{doc_id}"))
        assert "Book trains for journeys under four hours." in doc
        assert text_of(await alice.read_resource(f"agentix://conversations/{conv.json()['id']}")).startswith("# Trip")
        assert "Sales went up." in text_of(await alice.read_resource(f"agentix://reports/{report['id']}/md"))
        [pdf] = (await alice.read_resource(f"agentix://reports/{report['id']}/pdf")).contents
        assert isinstance(pdf, types.BlobResourceContents) and pdf.mime_type == "application/pdf"
        assert base64.b64decode(pdf.blob).startswith(b"%PDF")

        for uri in (f"agentix://workflows/{wf_id}", f"agentix://kb/handbook/{doc_id}",
                    f"agentix://reports/{report['id']}/md", "agentix://nothing/here"):  # fmt: skip
            with pytest.raises(MCPError) as missing:
                await bob.read_resource(uri)
            assert missing.value.error.code == mcp_resources.RESOURCE_NOT_FOUND

        templates = {t.uri_template for t in (await alice.list_resource_templates()).resource_templates}
        assert "agentix://kb/{kb}/{doc}" in templates and "agentix://workflows/{id}" in templates
        kb_ref = types.ResourceTemplateReference(type="ref/resource", uri="agentix://kb/{kb}/{doc}")
        kbs = await alice.complete(kb_ref, {"name": "kb", "value": "hand"})
        assert kbs.completion.values == ["handbook"]
        docs = await alice.complete(kb_ref, {"name": "doc", "value": ""}, context_arguments={"kb": "handbook"})
        assert docs.completion.values == [doc_id]
        assert (await bob.complete(kb_ref, {"name": "kb", "value": ""})).completion.values == []
        await alice.set_logging_level("debug")


async def test_resources_list_pages_with_a_cursor(mcp: Mcp, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_resources, "PAGE", 2)
    async with api(mcp, "carol") as http:
        ids = [(await http.post("/workflows", json={"name": f"w{i}", "dsl": DSL})).json()["id"] for i in range(5)]
    async with mcp.session("carol") as carol:
        pages: list[list[str]] = []
        cursor: str | None = None
        while True:
            page = await carol.list_resources(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            pages.append([r.uri for r in page.resources])
            cursor = page.next_cursor
            if cursor is None:
                break
        seen = [u for p in pages for u in p]
        assert sorted(seen) == sorted(f"agentix://workflows/{i}" for i in ids)  # no repeat, none skipped
        assert max(len(p) for p in pages) == 2
        with pytest.raises(MCPError) as bad:
            await carol.list_resources(params=types.PaginatedRequestParams(cursor="not-ours"))
        assert bad.value.error.code == types.INVALID_PARAMS


async def test_the_prompt_library_is_prompts_with_its_variables_as_arguments(mcp: Mcp) -> None:
    async with api(mcp, "root", admin=True) as admin:
        made = await admin.post("/admin/prompts/summarize/versions",
                                json={"text": "Summarize {{ topic }} for {{audience}} in {{ topic }}-speak."})
        assert made.status_code == 201, made.text
        assert (await admin.post("/admin/prompts/summarize/activate", json={"version": 1})).status_code in (200, 204)
        draft = await admin.post("/admin/prompts/draft-only/versions", json={"text": "never active"})
        assert draft.status_code == 201
    async with mcp.session("alice") as alice:
        prompts = {p.name: p for p in (await alice.list_prompts()).prompts}
        assert "draft-only" not in prompts  # no active version: not offered
        assert [(a.name, a.required) for a in prompts["summarize"].arguments or []] == [
            ("topic", True), ("audience", True)]
        got = await alice.get_prompt("summarize", {"topic": "MCP", "audience": "engineers"})
        [message] = got.messages
        assert message.role == "user" and isinstance(message.content, types.TextContent)
        assert message.content.text == "Summarize MCP for engineers in MCP-speak."
        with pytest.raises(MCPError) as missing:
            await alice.get_prompt("summarize", {"topic": "MCP"})
        assert "audience" in missing.value.error.message
        with pytest.raises(MCPError) as extra:
            await alice.get_prompt("summarize", {"topic": "a", "audience": "b", "tone": "c"})
        assert "tone" in extra.value.error.message
        with pytest.raises(MCPError):
            await alice.get_prompt("nope", {})
        ref = types.PromptReference(type="ref/prompt", name="summarize")
        assert (await alice.complete(ref, {"name": "topic", "value": "M"})).completion.values == []


async def test_tools_list_pages_with_a_cursor(mcp: Mcp, monkeypatch: pytest.MonkeyPatch) -> None:
    from services.gateway.protocols.mcp import server as mcp_server

    monkeypatch.setattr(mcp_server, "TOOLS_PAGE", 3)
    async with mcp.session("alice") as alice:
        names: list[str] = []
        page = await alice.list_tools()
        names += [t.name for t in page.tools]
        while page.next_cursor:
            page = await alice.list_tools(params=types.PaginatedRequestParams(cursor=page.next_cursor))
            assert len(page.tools) <= 3
            names += [t.name for t in page.tools]
        assert len(names) == len(set(names)) > 3 and {"ask_agent", "kb_search"} <= set(names)
        with pytest.raises(MCPError) as bad:
            await alice.list_tools(params=types.PaginatedRequestParams(cursor="bm90LW91cnM"))
        assert bad.value.error.code == types.INVALID_PARAMS
