"""`background: true` on the Responses API, driven by the real `openai` SDK against a real gateway
and dispatcher with the scripted model holding its answer (a gate) for as long as the test needs:
the response is answered at once (`queued`), read as it goes (`in_progress`) and once done
(output, usage), cancelled mid-run, and streamed, left and read again from a sequence number
while the run goes on regardless of the client."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.integration import test_openai_compat as compat
from tests.integration.chat_support import WAIT_S, ChatStack
from tests.support import openai_server as oai
from tests.support.wait import eventually

# The compatibility tests' stack (gateway, dispatcher, the scripted model), set up once per module.
srv, tools, stack, scripted = compat.srv, compat.tools, compat.stack, compat.scripted
sdk, native = compat.sdk, compat.native


async def _release(server: oai.OpenAIServer, gate: str) -> None:
    async with httpx.AsyncClient() as http:
        (await http.post(server.url.removesuffix("/v1") + "/_release", json={"gate": gate})).raise_for_status()


async def _asked(server: oai.OpenAIServer) -> None:
    """Until the model has been asked (the run is under way, its answer held)."""
    async def asked() -> bool:
        return bool(server.requests())

    await eventually(asked, attempts=int(WAIT_S / 0.05), every_s=0.05)


async def test_a_background_response_is_answered_at_once_and_polled_until_completed(
    stack: ChatStack, scripted: oai.OpenAIServer,
) -> None:
    scripted.script([oai.reply("Done in the background.", gate="bg-poll", gate_after=1)])
    async with sdk(stack, "bg-poller") as ai:
        made = await ai.responses.create(model="agentix-direct", input="Work on it", background=True,
                                         instructions="Be brief.", metadata={"ticket": "T-7"}, temperature=0.3)
        assert (made.status, made.background, made.output, made.usage) == ("queued", True, [], None)
        await _asked(scripted)
        going = await ai.responses.retrieve(made.id)
        assert (going.id, going.status, going.usage) == (made.id, "in_progress", None)
        # The object read again repeats what the request asked, as the one `create` answered did.
        repeated = ("model", "background", "instructions", "metadata", "temperature", "created_at")
        assert [getattr(going, f) for f in repeated] == [getattr(made, f) for f in repeated]
        await _release(scripted, "bg-poll")

        async def finished() -> Any:
            got = await ai.responses.retrieve(made.id)
            return got if got.status not in ("queued", "in_progress") else None

        done = await eventually(finished, attempts=int(WAIT_S / 0.05), every_s=0.05)
    assert (done.status, done.output_text) == ("completed", "Done in the background.")
    assert done.usage is not None and done.usage.output_tokens > 0


async def test_a_background_response_is_cancelled_mid_run(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    scripted.script([oai.reply("Never finished.", gate="bg-cancel", gate_after=1)])
    async with sdk(stack, "bg-canceller") as ai:
        made = await ai.responses.create(model="agentix-direct", input="Work long", background=True)
        await _asked(scripted)
        cancelled = await ai.responses.cancel(made.id)
        assert cancelled.status == "cancelled"
        assert (await ai.responses.retrieve(made.id)).status == "cancelled"
    await _release(scripted, "bg-cancel")
    client = await native(stack, "bg-canceller")
    assert (await client.get(f"/api/v1/tasks/{made.id.removeprefix('resp_')}")).json()["status"] == "cancelled"


async def test_a_background_stream_left_goes_on_and_is_read_again_after_a_sequence_number(
    stack: ChatStack, scripted: oai.OpenAIServer,
) -> None:
    scripted.script([oai.reply("Streamed in the background.", gate="bg-stream", gate_after=2, chunk_chars=4)])
    async with sdk(stack, "bg-streamer") as ai:
        events = await ai.responses.create(model="agentix-direct", input="Stream it", background=True, stream=True)
        seen = []
        async for event in events:
            seen.append(event)
            if event.type == "response.output_text.delta":
                break  # under way: leave
        await events.close()
        made_id = seen[0].response.id  # type: ignore[union-attr]
        assert seen[0].response.background is True  # type: ignore[union-attr]
        await _release(scripted, "bg-stream")
        last = seen[-1].sequence_number
        rest = [e async for e in await ai.responses.retrieve(made_id, stream=True, starting_after=last)]
        done = await ai.responses.retrieve(made_id)
    assert rest[0].sequence_number == last + 1 and rest[-1].type == "response.completed"
    said = "".join(e.delta for e in [*seen, *rest] if e.type == "response.output_text.delta")  # type: ignore[union-attr]
    assert said == "Streamed in the background." == done.output_text
    assert done.status == "completed"


async def test_background_without_store_is_refused(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    async with sdk(stack, "bg-nostore") as ai:
        with pytest.raises(openai.BadRequestError) as refused:
            await ai.responses.create(model="agentix-direct", input="Hi", background=True, store=False)
    assert (refused.value.param, refused.value.code) == ("background", "unsupported_parameter")
    assert scripted.requests() == []
