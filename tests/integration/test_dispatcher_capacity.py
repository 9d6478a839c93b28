"""One dispatcher holds as many runs as `dispatcher_max_runs` allows: runs that wait on a slow
model do not queue behind each other. The scripted model holds every stream after its first
chunk until the test releases it, so each request it has received is one still in flight at the
model: all of them at once, or the dispatcher is queueing runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from shared.bus import Bus
from shared.bus.events import last_event
from shared.bus.tools import ToolRegistry, serve_tools
from shared.contract.task import TaskMessage
from shared.settings import Settings
from tests.integration.conftest import scripted_settings
from tests.support import openai_server as oai
from tests.support.dispatcher import dispatcher
from tests.support.nats_server import NatsServer
from tests.support.wait import eventually

GATE = "slow-model"
WAIT = {"attempts": 3000, "every_s": 0.02}  # up to a minute on a loaded machine
DSL = {
    "version": "1",
    "nodes": [{"id": "in", "kind": "input"},
              {"id": "ans", "kind": "agent", "config": {"prompt": "{{ in.text }}"}},
              {"id": "out", "kind": "output", "config": {"value": "{{ ans.output }}"}}],
    "edges": [{"source": "in", "target": "ans"}, {"source": "ans", "target": "out"}],
}


@pytest.fixture
async def held(nats_server: NatsServer, tmp_path: Path, srv: oai.OpenAIServer) -> AsyncIterator[tuple[Bus, Settings]]:
    """A bus, tool services that answer `list_tools` at once, and the model holding every stream
    on the gate (released at the end whatever happened, so no run outlives the test)."""
    srv.script([], then=oai.reply("held answer", gate=GATE, gate_after=1))
    settings = scripted_settings(nats_server, tmp_path, srv)
    bus = await Bus.connect(settings, name="test")
    await bus.declare()
    tools = [await serve_tools(bus, ToolRegistry("go")), await serve_tools(bus, ToolRegistry("py"))]
    try:
        yield bus, settings
    finally:
        await release(srv)
        for server in tools:
            await server.drain()
        await bus.close()


async def release(srv: oai.OpenAIServer) -> None:
    async with httpx.AsyncClient() as http:
        (await http.post(srv.url.removesuffix("/v1") + "/_release", json={"gate": GATE})).raise_for_status()


async def submit(bus: Bus, count: int) -> list[str]:
    ids = [f"held-{i}" for i in range(count)]
    for task_id in ids:
        await bus.js_publish(bus.subjects.tasks_submit,
                             TaskMessage(task_id=task_id, user_id="u1", dsl=DSL, input={"text": task_id}),
                             msg_id=task_id)
    return ids


async def all_done(bus: Bus, ids: list[str]) -> None:
    async def check() -> bool:
        for task_id in ids:
            last = await last_event(bus, task_id, "status")
            if last is None or last.type != "done":
                return False
        return True

    await eventually(check, **WAIT)


async def test_a_dispatcher_holds_a_hundred_runs_waiting_on_the_model(
        held: tuple[Bus, Settings], srv: oai.OpenAIServer) -> None:
    bus, settings = held
    async with dispatcher(settings):
        ids = await submit(bus, 100)

        async def all_at_the_model() -> bool:
            return len(srv.requests()) >= 100

        # No stream has ended (the gate is shut): the 100 requests are at the model at once.
        await eventually(all_at_the_model, **WAIT)
        assert len({r["body"]["messages"][-1]["content"] for r in srv.requests()}) == 100  # one per task
        info = await bus.js.consumer_info(bus.names.tasks_stream, bus.names.dispatcher_consumer)
        assert info.num_ack_pending == 100 and info.num_pending == 0
        await release(srv)
        await all_done(bus, ids)


async def test_the_dispatcher_takes_no_more_than_its_max_runs(
        held: tuple[Bus, Settings], srv: oai.OpenAIServer) -> None:
    bus, settings = held
    async with dispatcher(settings.model_copy(update={"dispatcher_max_runs": 20})):
        ids = await submit(bus, 30)

        async def held_at_the_model() -> bool:
            return len(srv.requests()) >= 20

        await eventually(held_at_the_model, **WAIT)
        # The other ten stay in the stream for another dispatcher (or this one, once a run ends).
        info = await bus.js.consumer_info(bus.names.tasks_stream, bus.names.dispatcher_consumer)
        assert (info.num_ack_pending, info.num_pending) == (20, 10)
        assert len(srv.requests()) == 20
        await release(srv)
        await all_done(bus, ids)
    assert len(srv.requests()) == 30


def test_the_tasks_consumer_has_room_for_many_dispatchers() -> None:
    """The consumer's cap is across all dispatchers: it must not be the tighter bound for a few."""
    settings = Settings()
    assert settings.task_max_ack_pending >= 8 * settings.dispatcher_max_runs
    assert settings.dispatcher_max_runs >= 100
