"""Facts at ingest from a configured model (the scripted OpenAI-protocol server), and the
deterministic extractor when that model fails — ingestion never depends on it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from shared.settings import Settings
from tests.integration.test_tools_support import InProcess, Tools, connected
from tests.support.openai_server import OpenAIServer, reply, server_error


@pytest.fixture
def scripted() -> Iterator[OpenAIServer]:
    server = OpenAIServer().start_in_thread()
    yield server
    server.stop_thread()


async def test_model_facts_and_fallback(settings: Settings, scripted: OpenAIServer) -> None:
    answer = {"facts": [{"subject": "Orion", "relation": "runs on", "object": "Zephyr Cluster"}]}
    scripted.script([reply(json.dumps(answer))], model="facts-test")
    cfg = settings.model_copy(update={"kb_facts_model": "facts-test", "kb_facts_base_url": scripted.url})
    user = f"u-{uuid.uuid4().hex[:6]}"
    async with connected(settings) as bus:
        services = await InProcess(cfg).start()
        try:
            t = Tools(bus)
            await t.ready()
            await t("kb_create", user, name="facts")
            job = await t("kb_ingest", user, kb="facts", text="Orion schedules the nightly builds.", title="Orion")
            assert (await t.wait_job(job["job_id"])).status == "done"
            graph = await t("kb_graph", user, kb="facts", entity="Orion")
            assert {(f["subject"], f["relation"], f["object"]) for f in graph["facts"]} == {
                ("Orion", "runs_on", "Zephyr Cluster")
            }
            prompt = scripted.requests()[0]["body"]["messages"][0]["content"]
            assert "Orion schedules the nightly builds." in prompt

            scripted.script([server_error(500), server_error(500)], model="facts-test")
            job = await t("kb_ingest", user, kb="facts", text="Vega is a message broker.", title="Vega")
            assert (await t.wait_job(job["job_id"])).status == "done"
            graph = await t("kb_graph", user, kb="facts", entity="Vega")
            assert any(f["relation"] == "is_a" for f in graph["facts"])  # the deterministic extractor's
        finally:
            await services.stop()
