"""One failure policy, end to end: a failure says whether another attempt may succeed
(`retryable`), that word travels where the failure goes — a model's final error, a tool reply
over NATS, a bridged MCP server's reply — and the decision to try again reads it: an ingest job
whose failure no attempt can fix ends at once, without a redelivery."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel

from services.dispatcher.llm.api import LLMError, LLMRequest
from services.tools_go_equiv.ingest.worker import GONE
from services.tools_go_equiv.mcp_bridge.bridge import McpBridge
from services.tools_go_equiv.mcp_bridge.timing import Timing
from shared.bus import Bus
from shared.bus.events import read_events
from shared.bus.tools import ToolClient, ToolContext, ToolFailure, ToolRegistry, serve_tools
from shared.contract.control_keys import MCP_SERVERS_KEY
from shared.contract.ingest import IngestJob
from shared.contract.mcp import McpServerConfig, McpServers
from shared.secrets import encrypt_secret
from shared.settings import Settings
from tests.integration.test_llm_pool import KEY, make_pool, model
from tests.integration.test_tools_support import InProcess, Tools, connected
from tests.support import openai_server as oai
from tests.support.wait import eventually

MESSAGES = [{"role": "user", "content": "Say hello"}]


# ---- the model layer: the error that ends a call says whether a later call may succeed --------

@pytest.fixture
async def srv() -> AsyncIterator[oai.OpenAIServer]:
    async with oai.OpenAIServer(api_key=KEY, models=["primary-m"]) as server:
        yield server


@pytest.mark.parametrize(("steps", "retryable"), [
    ([oai.server_error(503)] * 3, True),
    ([oai.rate_limited(retry_after=0)] * 3, True),
    ([oai.auth_failure()], False),
    ([oai.error(400, "unsupported parameter: top_k")], False),
], ids=["5xx", "429", "401", "400"])
async def test_a_models_final_error_says_whether_a_later_call_may_succeed(
        srv: oai.OpenAIServer, settings: Settings, steps: list[oai.Step], retryable: bool) -> None:
    srv.script(steps, model="primary-m")
    lsettings = settings.model_copy(update={"secret_key": "deployment-secret-for-tests"})
    pool = make_pool(lsettings, [model("primary", srv.url)])
    try:
        with pytest.raises(LLMError) as caught:
            await pool.pinned().complete(LLMRequest(messages=MESSAGES))
        assert caught.value.retryable is retryable
    finally:
        await pool.aclose()


# ---- tool replies over NATS ------------------------------------------------------------------

class Nothing(BaseModel):
    pass


async def test_a_tool_reply_carries_whether_the_call_may_succeed_later(bus: Bus) -> None:
    registry = ToolRegistry("go")

    @registry.tool(name="store_down", title="t", description="its store is unreachable")
    async def store_down(args: Nothing, ctx: ToolContext) -> Any:
        raise ToolFailure("unavailable", "the store is down", retryable=True)

    @registry.tool(name="refuses", title="t", description="refuses the request")
    async def refuses(args: Nothing, ctx: ToolContext) -> Any:
        raise ToolFailure("not_found", "no such thing")

    server = await serve_tools(bus, registry)
    try:
        client = ToolClient(bus, services=("go",))
        down = await client.call("store_down", {})
        assert down.error is not None and (down.error.code, down.error.retryable) == ("unavailable", True)
        refused = await client.call("refuses", {})
        assert refused.error is not None and (refused.error.code, refused.error.retryable) == ("not_found", False)
    finally:
        await server.drain(2)
    # Nobody serves it any more (a service restarting): worth calling again later.
    gone = await client.call("store_down", {})
    assert gone.error is not None and (gone.error.code, gone.error.retryable) == ("unavailable", True)


# ---- the MCP bridge: a server that may come back, and one that cannot -----------------------

async def test_a_bridged_server_that_reconnects_is_retryable_one_that_cannot_is_not(bus: Bus) -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def mute(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # accepts and never speaks: the session keeps reconnecting

    silent = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    timing = Timing(connect_s=0.5, call_s=1.0, probe_every_s=0.5, retry_min_s=0.05, retry_max_s=0.2)
    bridge = McpBridge(bus, "the-deployment-secret", concurrency=4, timing=timing)
    sealed = encrypt_secret('{"Authorization": "Bearer x"}', "another-deployment-secret")
    servers = [McpServerConfig(name="mute", url=f"http://127.0.0.1:{port}/mcp"),
               McpServerConfig(name="sealed", url="http://127.0.0.1:9/mcp", headers_enc=sealed)]
    try:
        doc = McpServers(revision=1, servers={s.name: s for s in servers})
        await bridge.apply(MCP_SERVERS_KEY, doc.model_dump(mode="json"), 1)

        async def failed_once() -> str | None:
            return bridge.servers["mute"].last_error

        assert await eventually(failed_once, attempts=400, every_s=0.025)
        client = ToolClient(bus, services=())
        client._where.update({"mute.any": "mcp", "sealed.any": "mcp"})  # what list_tools would say
        down = await client.call("mute.any", {}, timeout_s=5)
        assert down.error is not None and down.error.code == "unavailable" and down.error.retryable
        locked = await client.call("sealed.any", {}, timeout_s=5)
        assert locked.error is not None and "headers are unusable" in locked.error.message
        assert not locked.error.retryable  # headers that do not decrypt never will
    finally:
        await bridge.stop(2)
        for writer in accepted:
            writer.close()
        silent.close()


# ---- ingestion: a failure no attempt can fix ends the job at once ------------------------------

async def test_an_ingest_job_whose_knowledge_base_is_gone_fails_at_once(settings: Settings) -> None:
    cfg = settings.model_copy(update={"ingest_max_deliver": 3})
    async with connected(cfg) as bus:
        services = await InProcess(cfg).start()
        try:
            await Tools(bus).ready()
            # A job nobody registered: its row is not there (as when its KB was deleted meanwhile).
            job = IngestJob(job_id="job_gone_1", kb="kb_gone", document_id="doc_gone", user_id="alice",
                            title="Gone", text="hello", content_hash="gone-1")
            await bus.js_publish(bus.subjects.ingest_jobs, job, msg_id=job.msg_id)
            events = []
            async for _, event in read_events(bus, job.job_id, follow=True, idle_timeout_s=30):
                events.append(event)
            assert [(e.type, getattr(e, "status", None), getattr(e, "error", None)) for e in events] == [
                ("done", "failed", GONE)]  # no `retrying`: it was not handed back

            async def acked() -> bool:  # at once, not handed back for a redelivery
                return (await bus.js.stream_info(bus.names.ingest_stream)).state.messages == 0

            assert await eventually(acked, attempts=100, every_s=0.05)
        finally:
            await services.stop()
