"""Which model answers a chat run, on SQLite and PostgreSQL, with a scripted model server behind
admin-registered models: the message's `model` > the conversation's > the user's default
(`/users/me`) > the failover chain; the run and its answer record the model that answered."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from shared.settings import Settings
from tests.integration.chat_support import ENDED, chat_stack, new_conversation, run_state, say, thread
from tests.integration.conftest import scripted_settings
from tests.support import openai_server as oai
from tests.support.dispatcher import dispatcher
from tests.support.nats_server import NatsServer


@pytest.fixture(params=["sqlite", "postgres"])
def scripted(request: pytest.FixtureRequest, nats_server: NatsServer, tmp_path: Path,
             srv: oai.OpenAIServer) -> Settings:
    settings = scripted_settings(nats_server, tmp_path, srv)
    if request.param == "postgres":
        settings = settings.model_copy(update={"gateway_db_url": request.getfixturevalue("fresh_pg")})
    return settings


async def answered_by(client: httpx.AsyncClient, srv: oai.OpenAIServer, conversation: str, **extra: str) -> str:
    """The upstream model the run's request reached; checks the run and its answer say so too."""
    before = len(srv.requests())
    run_id = (await say(client, conversation, "Which model are you?", **extra))["run"]["id"]
    run = await run_state(client, run_id, ENDED)
    assert run["state"] == "succeeded", run
    [request] = srv.requests()[before:]
    answer = (await thread(client, conversation))[-1]
    assert run["model"] == answer["model"] and answer["model"]
    return str(request["model"])


async def test_model_precedence_message_then_conversation_then_user_default_then_chain(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    async with chat_stack(scripted, with_dispatcher=False) as stack:
        admin = await stack.client("root", admin=True)
        for name in ("chain", "msg", "conv", "mine"):
            created = await admin.post("/api/v1/admin/models", json={
                "name": name, "provider": "openai", "base_url": srv.url, "model": f"{name}-upstream", "api_key": "k"})
            assert created.status_code == 201, created.text
        chain = await admin.put("/api/v1/admin/models/chain", json={"active": "chain", "fallbacks": []})
        assert chain.status_code == 200, chain.text
        async with dispatcher(scripted):  # started now, it reads the models from the control bucket
            alice = await stack.client("alice")
            assert (await alice.get("/api/v1/users/me")).json()["default_model"] is None
            patched = await alice.patch("/api/v1/users/me", json={"default_model": "mine"})
            assert patched.status_code == 200, patched.text
            assert (patched.json()["id"], patched.json()["default_model"]) == ("alice", "mine")
            assert (await alice.get("/api/v1/users/me")).json()["default_model"] == "mine"
            seen = (await admin.get("/api/v1/admin/users/alice")).json()
            assert (seen["id"], seen["role"], seen["default_model"]) == ("alice", "user", "mine")
            listed = (await admin.get("/api/v1/admin/users")).json()["items"]
            assert {"alice": "mine"}.items() <= {u["id"]: u["default_model"] for u in listed}.items()
            assert (await alice.get("/api/v1/admin/users")).status_code == 403

            pinned = await new_conversation(alice, mode="direct", model="conv")
            assert await answered_by(alice, srv, pinned, model="msg") == "msg-upstream"
            assert await answered_by(alice, srv, pinned) == "conv-upstream"
            free = await new_conversation(alice, mode="direct")
            assert await answered_by(alice, srv, free) == "mine-upstream"
            run = (await alice.get(f"/api/v1/runs/{(await thread(alice, free))[-1]['run_id']}")).json()
            assert run["model"] == "mine"

            cleared = await alice.patch("/api/v1/users/me", json={"default_model": ""})
            assert cleared.json()["default_model"] is None
            assert await answered_by(alice, srv, free) == "chain-upstream"
            bob = await stack.client("bob")  # another user's default is not alice's
            assert (await bob.get("/api/v1/users/me")).json()["default_model"] is None
            assert (await alice.patch("/api/v1/users/me", json={"role": "admin"})).status_code == 422
