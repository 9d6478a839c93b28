"""A task's record never shows it ended without its result: hundreds of short tasks (parallel
branches, a branch, a map, a failing tool) run on a real dispatcher while their records are
polled — through the API and straight from the table, as fast as the database answers — and no
read ever finds a terminal status without its output (done) or error (failed). The recorder
applies one event per transaction here, so a task's terminal `status` and its `done` are surely
written apart: between them, a record moved by the first would read ended without its result."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from sqlmodel import col, select

from services.gateway.embedded import EmbeddedGateway
from services.gateway.runs.recorder import Recorder
from services.gateway.tables import Task
from shared.auth_tokens import mint_token
from shared.bus.tools import ToolContext, ToolRegistry, serve_tools
from shared.contract.task import TERMINAL
from tests.support.dispatcher import dispatcher

TASKS = 200


class Args(BaseModel):
    label: str = ""


def tools() -> ToolRegistry:
    registry = ToolRegistry("go")

    @registry.tool(name="echo", title="Echo", description="Returns its label.")
    async def echo(args: Args, ctx: ToolContext) -> dict[str, Any]:
        return {"label": args.label}

    @registry.tool(name="boom", title="Boom", description="Always fails.")
    async def boom(args: Args, ctx: ToolContext) -> dict[str, Any]:
        raise RuntimeError(f"boom {args.label}")

    return registry


def tool(node_id: str, name: str = "echo") -> dict[str, Any]:
    return {"id": node_id, "kind": "tool", "config": {"tool": name, "args": {"label": node_id}}}


def doc(nodes: list[dict[str, Any]], edges: list[tuple[str, str] | tuple[str, str, str]]) -> dict[str, Any]:
    return {"version": "1", "nodes": [{"id": "in", "kind": "input"}, *nodes],
            "edges": [{"source": e[0], "target": e[1], **({"sourceHandle": e[2]} if len(e) > 2 else {})}
                      for e in edges]}


OUT = {"id": "out", "kind": "output", "config": {"value": "{{ in.text }}"}}
WORKFLOWS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    (doc([tool("a"), tool("b"), OUT], [("in", "a"), ("in", "b"), ("a", "out"), ("b", "out")]), {"text": "both"}),
    (doc([{"id": "br", "kind": "branch", "config": {"condition": "'?' in in.text"}}, tool("yes"), tool("no"), OUT],
         [("in", "br"), ("br", "yes", "true"), ("br", "no", "false"), ("yes", "out"), ("no", "out")]),
     {"text": "why?"}),
    (doc([{"id": "each", "kind": "map", "config": {"items": "{{ in.items }}", "node": {
        "kind": "tool", "config": {"tool": "echo", "args": {"label": "{{ item }}"}}}}},
          {"id": "out", "kind": "output", "config": {"value": "{{ each.output }}"}}],
         [("in", "each"), ("each", "out")]), {"items": ["x", "y", "z"]}),
    (doc([tool("a"), tool("fail", "boom"), OUT], [("in", "a"), ("a", "fail"), ("fail", "out")]), {"text": "no"}),
]


@pytest.fixture
async def alice(gw: EmbeddedGateway) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {mint_token(gw.settings, 'alice')}"}
    async with httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=30) as client:
        yield client


def problem(row: dict[str, Any]) -> str | None:
    """What is wrong with a task as read, if anything."""
    if row["status"] == "done" and row["output"] is None:
        return "done without its output"
    if row["status"] in TERMINAL and row["status"] != "done" and not row["error"]:
        return f"{row['status']} without its error"
    return None


async def test_a_polled_task_never_reads_ended_without_its_result(gw: EmbeddedGateway,
                                                                  alice: httpx.AsyncClient) -> None:
    st = gw.app.state
    await st.recorder.stop()
    recorder = Recorder(st.bus, st.db, batch=1)
    await recorder.start()
    served = await serve_tools(st.bus, tools())
    none_in_py = await serve_tools(st.bus, ToolRegistry("py"))
    seen_wrong: list[str] = []
    ended: dict[str, str] = {}
    try:
        async with dispatcher(gw.settings):
            ids: list[str] = []
            for dsl, task_input in itertools.islice(itertools.cycle(WORKFLOWS), TASKS):
                resp = await alice.post("/api/v1/tasks", json={"dsl": dsl, "input": task_input})
                assert resp.status_code == 202, resp.text
                ids.append(resp.json()["id"])

            def rows(session: Any, wanted: list[str]) -> list[dict[str, Any]]:
                found = session.exec(select(Task.id, Task.status, Task.output, Task.error)
                                     .where(col(Task.id).in_(wanted)))
                return [{"id": i, "status": s, "output": o, "error": e} for i, s, o, e in found]

            async with asyncio.timeout(240):
                while len(ended) < len(ids):
                    going = [i for i in ids if i not in ended]
                    for row in await st.db.run(rows, going):  # the records themselves
                        if (wrong := problem(row)) is not None:
                            seen_wrong.append(f"table: {row['id']} {wrong}")
                        if row["status"] in TERMINAL:
                            ended[row["id"]] = row["status"]
                    views = await asyncio.gather(*(alice.get(f"/api/v1/tasks/{i}") for i in going[:20]))
                    for view in views:  # and as the API shows them
                        body = view.json()
                        if (wrong := problem(body)) is not None:
                            seen_wrong.append(f"view: {body['id']} {wrong}")
    finally:
        await served.drain()
        await none_in_py.drain()
        await recorder.stop()
    assert seen_wrong == []
    assert sorted(set(ended.values())) == ["done", "failed"]
    assert sum(status == "failed" for status in ended.values()) == TASKS // len(WORKFLOWS)
