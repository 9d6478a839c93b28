"""Hybrid search with a configured reranker: the fused candidates are re-scored by a `/rerank`
endpoint (the scripted OpenAI-protocol server here), each hit says the reranker ranked it, and a
failing reranker leaves the fused order instead of failing the search."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from shared.settings import Settings
from tests.integration.test_tools_support import InProcess, Tools, connected, corpus_doc
from tests.support.openai_server import OpenAIServer, server_error


@pytest.fixture
def scripted() -> AsyncIterator[OpenAIServer]:
    server = OpenAIServer().start_in_thread()
    yield server
    server.stop_thread()


async def test_hybrid_results_are_reranked_and_a_failing_reranker_is_survived(
    settings: Settings, scripted: OpenAIServer
) -> None:
    cfg = settings.model_copy(update={"kb_rerank_model": "rerank-test", "kb_rerank_base_url": scripted.url,
                                     "kb_rerank_depth": 10})
    user = f"u-{uuid.uuid4().hex[:6]}"
    async with connected(settings) as bus:
        services = await InProcess(cfg).start()
        try:
            t = Tools(bus)
            await t.ready()
            await t("kb_create", user, name="docs")
            for stem in ("nats-overview", "jetstream-persistence"):
                doc = corpus_doc(stem)
                job = await t("kb_ingest", user, kb="docs", text=doc.read_text(), filename=doc.name)
                assert (await t.wait_job(job["job_id"])).status == "done"

            query = "JetStream persistence of streams"
            out = await t("kb_search", user, kb="docs", query=query, top_k=3, mode="hybrid")
            calls = scripted.requests("/v1/rerank")
            assert len(calls) == 1 and calls[0]["body"]["query"] == query
            assert 3 <= len(calls[0]["body"]["documents"]) <= 10  # the fused candidates, not just top_k
            hits = out["chunks"]
            assert [h["sources"]["rerank"]["rank"] for h in hits] == [1, 2, 3]
            scores = [h["score"] for h in hits]
            assert scores == sorted(scores, reverse=True)

            plain = await t("kb_search", user, kb="docs", query=query, top_k=3, mode="fulltext")
            assert all("rerank" not in h["sources"] for h in plain["chunks"])  # only hybrid is reranked

            scripted.script([server_error(500)], endpoint="rerank")
            fallback = await t("kb_search", user, kb="docs", query=query, top_k=3, mode="hybrid")
            assert fallback["chunks"] and all("rerank" not in h["sources"] for h in fallback["chunks"])
        finally:
            await services.stop()
