"""Ownership of KBs, documents, memories and reports (API.md: your own; admins see all) over real
HTTP, NATS and tool services: an admin lists and deletes another user's KB, lists and exports
their report, uses their memory with `?user_id=`; a non-admin still gets 404; neither tool
arguments nor an admin's own task (tool nodes and ReAct calls, through the real dispatcher) can
claim the admin flag."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.control import ControlPlane
from shared.bus.events import read_events
from shared.contract.events import AnyEvent
from shared.contract.models import ModelChain, ModelConfig
from shared.contract.tools import ToolMeta
from shared.settings import Settings
from tests.integration.test_tools_support import Tools, tools_and_gateway
from tests.support import openai_server as oai
from tests.support.dispatcher import dispatcher

TIMEOUT_S = 60.0
POLICY = "# Vacation\n\nBerlin office staff get 30 vacation days per year; unused days expire in March.\n"


@dataclass
class Env:
    settings: Settings
    bus: Bus
    tools: Tools
    alice: httpx.AsyncClient
    bob: httpx.AsyncClient
    root: httpx.AsyncClient  # an admin (role claim in the token)


@pytest.fixture
async def env(settings: Settings) -> AsyncIterator[Env]:
    async with tools_and_gateway(settings) as (cfg, bus, tools, base_url):

        def client(user: str, admin: bool = False) -> httpx.AsyncClient:
            headers = {"Authorization": f"Bearer {mint_token(cfg, user, admin=admin)}"}
            return httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30)

        async with client("alice") as alice, client("bob") as bob, client("root", admin=True) as root:
            yield Env(cfg, bus, tools, alice, bob, root)


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    return response.json()


async def alice_data(env: Env) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Alice's KB with one ingested document, and one report."""
    kb = ok(await env.alice.post("/kb", json={"name": "handbook"}), 201)
    job = ok(await env.alice.post(f"/kb/{kb['id']}/documents", json={"title": "Vacation", "text": POLICY}), 202)
    assert (await env.tools.wait_job(job["job_id"])).status == "done"
    report = await env.tools("report_store", "alice", title="Alice's review", content="# Review\n\nAll good.\n")
    return kb, job, report


async def test_admin_sees_and_acts_on_other_users_kbs_and_reports(env: Env) -> None:
    kb, job, report = await alice_data(env)
    a, b, root = env.alice, env.bob, env.root

    # A non-admin still sees nothing of Alice's, by id or by name.
    assert ok(await b.get("/kb"))["items"] == [] and ok(await b.get("/reports"))["items"] == []
    for ref in (kb["id"], "handbook"):
        problem(await b.get(f"/kb/{ref}/documents"), 404)
        problem(await b.post(f"/kb/{ref}/search", json={"query": "vacation"}), 404)
        problem(await b.delete(f"/kb/{ref}"), 404)
    problem(await b.get(f"/kb/ingest/{job['job_id']}"), 404)
    problem(await b.get(f"/reports/{report['id']}/export", params={"format": "md"}), 404)

    # The admin lists every owner's KB and report, with the owner's id.
    mine = ok(await root.post("/kb", json={"name": "ops"}), 201)
    assert mine["user_id"] == "root"  # what an admin creates is the admin's
    listed = {k["id"]: k for k in ok(await root.get("/kb"))["items"]}
    assert set(listed) == {kb["id"], mine["id"]}
    assert listed[kb["id"]]["user_id"] == "alice" and listed[kb["id"]]["documents"] == 1
    assert [k["id"] for k in ok(await a.get("/kb"))["items"]] == [kb["id"]]  # Alice does not see root's
    reports = ok(await root.get("/reports"))["items"]
    assert [(r["id"], r["user_id"]) for r in reports] == [(report["id"], "alice")]

    # ... and acts on them by id: job state, documents, search, export.
    assert ok(await root.get(f"/kb/ingest/{job['job_id']}"))["status"] == "done"
    docs = ok(await root.get(f"/kb/{kb['id']}/documents"))["items"]
    assert [d["id"] for d in docs] == [job["document_id"]]
    hits = ok(await root.post(f"/kb/{kb['id']}/search", json={"query": "vacation days", "top_k": 1}))["chunks"]
    assert hits and hits[0]["doc_id"] == job["document_id"]
    md = await root.get(f"/reports/{report['id']}/export", params={"format": "md"})
    assert md.status_code == 200 and md.text == "# Review\n\nAll good.\n"
    # A name is only unique per user: another user's KB is addressed by id, never by name.
    problem(await root.get("/kb/handbook/documents"), 404)

    # An admin's upload into Alice's KB is the admin's document; Alice follows its job too.
    upload = await root.post(f"/kb/{kb['id']}/documents", json={"title": "Note", "text": "Root was here."})
    added = ok(upload, 202)
    assert (await env.tools.wait_job(added["job_id"])).status == "done"
    assert ok(await a.get(f"/kb/ingest/{added['job_id']}"))["status"] == "done"
    problem(await b.get(f"/kb/ingest/{added['job_id']}"), 404)
    ok(await root.delete(f"/kb/{kb['id']}/documents/{added['document_id']}"))
    problem(await a.get(f"/kb/{kb['id']}/documents/{added['document_id']}"), 404)

    deleted = ok(await root.delete(f"/kb/{kb['id']}"))
    assert deleted["deleted"] == kb["id"] and deleted["user_id"] == "alice" and deleted["documents"] == 1
    assert ok(await a.get("/kb"))["items"] == []
    problem(await a.post(f"/kb/{kb['id']}/search", json={"query": "vacation"}), 404)
    assert [k["id"] for k in ok(await root.get("/kb"))["items"]] == [mine["id"]]


async def test_admin_uses_another_users_memory_with_user_id(env: Env) -> None:
    a, b, root = env.alice, env.bob, env.root
    ok(await a.put("/memory/style", json={"value": "terse"}))
    ok(await root.put("/memory/own", json={"value": 1}))

    # Without ?user_id= an admin has their own memory, like everyone.
    assert [(m["key"], m["user_id"]) for m in ok(await root.get("/memory"))["items"]] == [("own", "root")]
    as_alice = {"user_id": "alice"}
    listed = ok(await root.get("/memory", params=as_alice))["items"]
    assert [(m["key"], m["user_id"], m["value"]) for m in listed] == [("style", "alice", "terse")]
    assert ok(await root.get("/memory/style", params=as_alice))["value"] == "terse"
    put = ok(await root.put("/memory/lang", params=as_alice, json={"value": "pt"}))
    assert put["user_id"] == "alice" and put["created"] is True
    assert {m["key"] for m in ok(await a.get("/memory"))["items"]} == {"style", "lang"}
    assert ok(await root.delete("/memory/style", params=as_alice)) == {"deleted": "style"}
    problem(await a.get("/memory/style"), 404)

    # For anyone else the parameter is ignored: Bob keeps seeing (and writing) his own memory.
    assert ok(await b.get("/memory", params=as_alice))["items"] == []
    problem(await b.get("/memory/lang", params=as_alice), 404)
    problem(await b.delete("/memory/lang", params=as_alice), 404)
    assert ok(await b.put("/memory/lang", params=as_alice, json={"value": "de"}))["user_id"] == "bob"
    assert ok(await a.get("/memory/lang"))["value"] == "pt"


async def test_tool_arguments_cannot_claim_admin_or_another_user(env: Env) -> None:
    kb, _, report = await alice_data(env)
    t = env.tools
    bob = ToolMeta(user_id="bob")

    async def as_bob(tool: str, **args: Any) -> Any:
        return await t.client.call(tool, args, bob, timeout_s=30)

    listed = await as_bob("kb_list", admin=True)
    assert listed.ok and listed.result["items"] == []
    for tool, args in (
        ("kb_delete", {"kb": kb["id"]}),
        ("kb_search", {"kb": kb["id"], "query": "vacation"}),
        ("doc_list", {"kb": kb["id"]}),
        ("report_export", {"report_id": report["id"], "format": "md"}),
    ):
        reply = await as_bob(tool, admin=True, **args)
        assert not reply.ok and reply.error.code == "not_found", (tool, reply)
        # Naming Alice in the arguments while the metadata says Bob is refused outright.
        reply = await as_bob(tool, user_id="alice", **args)
        assert not reply.ok and reply.error.code == "forbidden", (tool, reply)
    reply = await as_bob("memory_list", user_id="alice", admin=True)
    assert not reply.ok and reply.error.code == "forbidden"
    assert [k["id"] for k in (await t("kb_list", "alice"))["items"]] == [kb["id"]]


# ---- an admin's task: the dispatcher never passes the admin flag on


async def run_task(env: Env, dsl: dict[str, Any], q: str = "What is in the knowledge bases?") -> list[AnyEvent]:
    """Submit as the admin through the gateway; the task's events up to `done`."""
    task = ok(await env.root.post("/tasks", json={"dsl": dsl, "input": {"q": q}}), 202)
    events: list[AnyEvent] = []
    async with asyncio.timeout(TIMEOUT_S):
        async for _, event in read_events(env.bus, task["id"], follow=True):
            events.append(event)
    return events


def chain(*nodes: dict[str, Any]) -> dict[str, Any]:
    ids = [n["id"] for n in nodes]
    edges = [{"source": s, "target": d} for s, d in itertools.pairwise(ids)]
    return {"version": "1", "nodes": list(nodes), "edges": edges}


IN = {"id": "in", "kind": "input"}


async def test_an_admins_task_cannot_escalate_through_tool_calls(env: Env) -> None:
    kb, _, report = await alice_data(env)
    ok(await env.alice.put("/memory/secret", json={"value": "alice only"}))
    mine = ok(await env.root.post("/kb", json={"name": "ops"}), 201)
    claims = {"admin": True, "user_id": "alice"}  # what a model (or a DSL author) might write
    async with oai.OpenAIServer() as srv:
        config = ModelConfig(id="m", name="m", base_url=srv.url, model="m")
        await ControlPlane(env.bus).put("models.chain", ModelChain(revision=1, active="m", models={"m": config}))
        srv.script(
            [
                oai.reply(
                    "Looking.",
                    tool_calls=[
                        oai.tool_call("kb_list", claims, id="c1"),
                        oai.tool_call("kb_search", {"kb": kb["id"], "query": "vacation", **claims}, id="c2"),
                        oai.tool_call("report_export", {"report_id": report["id"], "format": "md", **claims}, id="c3"),
                        oai.tool_call("memory_get", {"key": "secret", **claims}, id="c4"),
                    ],
                ),
                oai.reply("Only your own knowledge base."),
            ],
            model="m",
        )
        agent = {
            "id": "ans",
            "kind": "agent",
            "config": {"prompt": "{{ in.q }}", "tools": ["kb_list", "kb_search", "report_export", "memory_get"]},
        }
        listing = {"id": "lst", "kind": "tool", "config": {"tool": "kb_list", "args": claims}}
        out = {"id": "out", "kind": "output", "config": {"value": "{{ lst.items | tojson }}"}}
        delete = {"id": "del", "kind": "tool", "config": {"tool": "kb_delete", "args": {"kb": kb["id"], **claims}}}
        async with dispatcher(env.settings):
            first = await run_task(env, chain(IN, agent, listing, out))
            second = await run_task(env, chain(IN, delete))

    # ReAct: every call ran as root without admin rights; the model was told so.
    assert first[-1].type == "done" and first[-1].status == "done", first[-1]
    fed_back = {m["tool_call_id"]: json.loads(m["content"]) for m in srv.requests()[1]["body"]["messages"]
                if m["role"] == "tool"}  # fmt: skip
    assert [k["id"] for k in fed_back["c1"]["result"]["items"]] == [mine["id"]]
    for call in ("c2", "c3", "c4"):
        assert fed_back[call]["ok"] is False and fed_back[call]["error"]["code"] == "not_found", fed_back[call]
    # A tool node: the injected user replaces the DSL's, and `admin` is just an ignored argument.
    items = json.loads(first[-1].output["out"])
    assert [k["id"] for k in items] == [mine["id"]] and items[0]["user_id"] == "root"

    assert second[-1].status == "failed"
    assert "not_found" in json.dumps([e.model_dump(mode="json") for e in second if e.type in ("error", "status")])
    assert [k["id"] for k in ok(await env.alice.get("/kb"))["items"]] == [kb["id"]]
    assert ok(await env.alice.get("/memory/secret"))["value"] == "alice only"
