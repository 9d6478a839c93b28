"""`/lg` assistants and store, driven by the real `langgraph-sdk` against a real gateway (uvicorn)
+ dispatcher: saved workflows as assistants whose graph is the DSL, assistants made, versioned,
searched and run, the probes, and the store as the user's memory — what the SDK writes the
agent's `memory_*` tools read, and the other way round."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from shared.auth_tokens import mint_token
from shared.settings import Settings
from tests.integration.chat_support import chat_stack
from tests.integration.test_langgraph_api import ask, lg
from tests.integration.test_tool_approval import tool_messages
from tests.support import openai_server as oai

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


async def test_probes_answer_without_a_token(scripted: Settings) -> None:
    async with chat_stack(scripted, with_dispatcher=False) as stack:
        async with httpx.AsyncClient(base_url=stack.gateways[0].url + "/lg") as http:
            assert (await http.get("/ok")).json() == {"ok": True}
            info = (await http.get("/info")).json()
            assert info["flags"]["assistants"] is True and info["flags"]["crons"] is True and info["version"]
            assert (await http.post("/assistants/search", json={})).status_code == 401


async def test_a_saved_workflow_is_an_assistant_whose_graph_is_its_dsl(scripted: Settings) -> None:
    async with chat_stack(scripted, with_dispatcher=False) as stack:
        client = lg(stack, "wf-owner")
        api = await stack.client("wf-owner")
        dsl = json.loads((EXAMPLES / "approval.json").read_text())
        made = await api.post("/api/v1/workflows", json={"name": "Announce", "dsl": dsl})
        assert made.status_code == 201, made.text
        wf = made.json()["id"]
        dsl["nodes"][1]["config"]["prompt"] = "Draft a longer announcement about: {{ in.text }}"
        assert (await api.put(f"/api/v1/workflows/{wf}", json={"name": "Announce v2", "dsl": dsl})).status_code == 200

        assistant = await client.assistants.get(wf)
        assert (assistant["graph_id"], assistant["name"], assistant["version"]) == ("workflow", "Announce v2", 2)
        graph = await client.assistants.get_graph(wf)
        assert [n["id"] for n in graph["nodes"]] == ["__start__", "in", "draft", "review", "out", "__end__"]
        assert [(e["source"], e["target"]) for e in graph["edges"]] == [
            ("__start__", "in"), ("in", "draft"), ("draft", "review"), ("review", "out"), ("out", "__end__")]
        assert graph["nodes"][3]["metadata"]["kind"] == "approval"
        schemas = await client.assistants.get_schemas(wf)
        assert schemas["input_schema"]["required"] == ["text"]
        assert schemas["input_schema"]["properties"]["text"]["type"] == "string"
        assert list(schemas["output_schema"]["properties"]) == ["out"]
        assert await client.assistants.get_subgraphs(wf) == {}
        versions = await client.assistants.get_versions(wf)
        assert [(v["version"], v["name"]) for v in versions] == [(2, "Announce v2"), (1, "Announce")]
        # Setting version 1 as the latest saves it again: the history only grows.
        latest = await client.assistants.set_latest(wf, 1)
        assert (latest["version"], latest["name"]) == (3, "Announce")
        assert (await api.get(f"/api/v1/workflows/{wf}")).json()["dsl"]["nodes"][1]["config"]["prompt"].startswith(
            "Draft a short")

        # A chat assistant's graph is its mode's DSL; the plan mode has its approval.
        plan = await client.assistants.get_graph("chat-plan")
        assert {"plan", "ans"} <= {n["id"] for n in plan["nodes"]}
        assert (await client.assistants.get_schemas("chat-react"))["input_schema"]["required"] == ["messages"]
        with pytest.raises(NotFoundError):
            await lg(stack, "someone-else").assistants.get_graph(wf)
        with pytest.raises(ConflictError):
            await client.assistants.delete(wf)


async def test_assistants_made_updated_searched_counted_run_and_deleted(scripted: Settings,
                                                                        srv: oai.OpenAIServer) -> None:
    async with chat_stack(scripted) as stack:
        client = lg(stack, "maker")
        made = await client.assistants.create(graph_id="chat", name="Direct helper", metadata={"team": "a"},
                                              config={"configurable": {"mode": "direct", "model": "m"}})
        aid = made["assistant_id"]
        assert (made["graph_id"], made["version"], made["metadata"]["team"]) == ("chat", 1, "a")
        assert (await client.assistants.get(aid))["config"] == {"configurable": {"mode": "direct", "model": "m"}}
        deep = await client.assistants.create(graph_id="chat", config={"recursion_limit": 50,
                                                                       "configurable": {"mode": "react"}})
        assert (await client.assistants.get(deep["assistant_id"]))["config"]["recursion_limit"] == 50
        await client.assistants.delete(deep["assistant_id"])
        for bad, field in (({"config": {"configurable": {"system_prompt": "Be terse."}}}, "system_prompt"),
                           ({"config": {"configurable": {"tools": ["memory_get"]}}}, "tools"),
                           ({"config": {"recursion_limit": 5}}, "recursion_limit")):
            with pytest.raises(UnprocessableEntityError) as refused:
                await client.assistants.create(graph_id="chat", **bad)
            assert field in refused.value.response.text
        with pytest.raises(UnprocessableEntityError):
            await client.assistants.create(graph_id="agent")
        with pytest.raises(ConflictError):
            await client.assistants.create(graph_id="chat", assistant_id="chat-react")
        same = await client.assistants.create(graph_id="chat", assistant_id=aid, if_exists="do_nothing")
        assert same["name"] == "Direct helper"

        updated = await client.assistants.update(aid, name="Renamed", metadata={"v": 2})
        assert (updated["version"], updated["name"], updated["metadata"]["team"]) == (2, "Renamed", "a")
        assert [v["version"] for v in await client.assistants.get_versions(aid)] == [2, 1]
        back = await client.assistants.set_latest(aid, 1)
        assert (back["version"], back["name"]) == (1, "Direct helper")
        with pytest.raises(NotFoundError):
            await client.assistants.set_latest(aid, 7)

        other = await client.assistants.create(graph_id="chat", name="A plan helper",
                                               context={"mode": "plan"})
        assert [a["assistant_id"] for a in await client.assistants.search(metadata={"team": "a"})] == [aid]
        by_name = await client.assistants.search(sort_by="name", sort_order="asc", select=["assistant_id", "name"])
        assert [a["name"] for a in by_name] == sorted(a["name"] for a in by_name)
        assert all(set(a) == {"assistant_id", "name"} for a in by_name)
        assert await client.assistants.count() == 5 and await client.assistants.count(graph_id="chat") == 5
        assert await client.assistants.count(name="helper") == 2
        async with httpx.AsyncClient(base_url=stack.gateways[0].url + "/lg",
                                     headers={"x-api-key": mint_token(stack.settings, "maker")}) as http:
            refused = await http.post("/assistants/search", json={"graph_id": "chat", "tags": ["x"]})
            assert refused.status_code == 422 and "tags" in refused.text
            refused = await http.request("DELETE", f"/assistants/{aid}", params={"delete_threads": "true"})
            assert refused.status_code == 422 and "delete_threads" in refused.text
        with pytest.raises(NotFoundError):
            await lg(stack, "someone-else").assistants.get(aid)
        assert await lg(stack, "someone-else").assistants.count() == 3

        # A run of a made assistant runs the chat agent in its mode, with its model.
        srv.script([oai.reply("Hello there.")])
        thread = await client.threads.create()
        values = await client.runs.wait(thread["thread_id"], aid, input=ask("Hi"))
        assert values["messages"][-1]["content"] == "Hello there."
        sent = srv.requests()[-1]["body"]
        assert sent["model"] == "m" and not sent.get("tools")  # direct: no tools

        await client.assistants.delete(aid)
        await client.assistants.delete(other["assistant_id"])
        with pytest.raises(NotFoundError):
            await client.assistants.get(aid)
        with pytest.raises(ConflictError):
            await client.assistants.delete("chat-react")


def _tool_results(srv: oai.OpenAIServer) -> dict[str, Any]:
    return {k: v for r in srv.requests() for k, v in tool_messages(r).items()}


async def test_the_store_is_the_users_memory_both_ways(scripted: Settings, srv: oai.OpenAIServer) -> None:
    async with chat_stack(scripted, real_tools=True) as stack:
        client = lg(stack, "rememberer")
        await client.store.put_item(["memory"], "favorite", {"color": "teal"})
        await client.store.put_item(["prefs", "ui"], "theme", {"dark": True, "accent": "teal"})
        await client.store.put_item(["prefs", "ui"], "lang", {"code": "nb"})
        item = await client.store.get_item(["prefs", "ui"], "theme")
        assert (item["namespace"], item["key"], item["value"]) == (["prefs", "ui"], "theme",
                                                                   {"dark": True, "accent": "teal"})
        found = await client.store.search_items(["prefs"], filter={"dark": True})
        assert [i["key"] for i in found["items"]] == ["theme"]
        found = await client.store.search_items([], query="teal")
        assert [(i["namespace"], i["key"]) for i in found["items"]] == [(["memory"], "favorite"),
                                                                        (["prefs", "ui"], "theme")]
        assert (await client.store.search_items(["prefs", "ui"], limit=1, offset=1))["items"][0]["key"] == "theme"
        assert await client.store.list_namespaces() == {"namespaces": [["memory"], ["prefs", "ui"]]}
        assert await client.store.list_namespaces(prefix=["prefs"], max_depth=1) == {"namespaces": [["prefs"]]}
        assert await client.store.list_namespaces(suffix=["ui"]) == {"namespaces": [["prefs", "ui"]]}
        with pytest.raises(NotFoundError):
            await lg(stack, "someone-else").store.get_item(["memory"], "favorite")
        with pytest.raises(UnprocessableEntityError):
            await client.store.put_item(["prefs"], "x", {"a": 1}, ttl=5)
        with pytest.raises(UnprocessableEntityError):
            await client.store.put_item(["a:b"], "x", {"a": 1})

        # The agent's memory tools read what the SDK wrote, and what they write is an item.
        srv.script([oai.reply(tool_calls=[oai.tool_call("memory_get", {"key": "favorite"}, id="c1"),
                                          oai.tool_call("memory_upsert", {"key": "prefs.ui:font", "value": {"pt": 14}},
                                                        id="c2")]),
                    oai.reply("Your favourite colour is teal.")])
        thread = await client.threads.create()
        values = await client.runs.wait(thread["thread_id"], "chat-react", input=ask("What is my favourite colour?"))
        assert values["messages"][-1]["content"] == "Your favourite colour is teal."
        results = _tool_results(srv)
        assert results["c1"]["result"]["value"] == {"color": "teal"}
        assert (await client.store.get_item(["prefs", "ui"], "font"))["value"] == {"pt": 14}
        api = await stack.client("rememberer")  # the API's memory is the same
        assert (await api.get("/api/v1/memory/prefs.ui:font")).json()["value"] == {"pt": 14}
        assert (await api.put("/api/v1/memory/nickname", json={"value": "Tee"})).status_code == 200
        assert (await client.store.get_item(["memory"], "nickname"))["value"] == {"value": "Tee"}

        await client.store.delete_item(["prefs", "ui"], "font")
        await client.store.delete_item(["prefs", "ui"], "font")  # gone already: still fine
        with pytest.raises(NotFoundError):
            await client.store.get_item(["prefs", "ui"], "font")
        assert (await api.get("/api/v1/memory/prefs.ui:font")).status_code == 404
