"""The Responses API's `conversation` on an Agentix conversation, driven by the real `openai` SDK
against a real gateway and dispatcher (the scripted model behind): each response is the next turn
of the caller's conversation (its id, or `{id}`), so the second's model request carries the first
turn; another user's or an unknown conversation is a 404, and `previous_response_id`, or what a
conversation's run would not read (`instructions`, earlier input items), with it a 400."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.integration import test_openai_compat as compat
from tests.integration.chat_support import ChatStack, run_state, thread
from tests.support import openai_server as oai

# The compatibility tests' stack (gateway, dispatcher, the scripted model), set up once per module.
srv, tools, stack, scripted = compat.srv, compat.tools, compat.stack, compat.scripted
sdk, native = compat.sdk, compat.native


async def _conversation(stack: ChatStack, user: str) -> str:
    client = await native(stack, user)
    created = await client.post("/api/v1/conversations", json={"mode": "direct"})
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


async def test_two_responses_are_two_turns_of_one_conversation(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    conversation = await _conversation(stack, "conv-user")
    scripted.script([oai.reply("Hello Ada."), oai.reply("You are Ada.")])
    async with sdk(stack, "conv-user") as ai:
        first = await ai.responses.create(model="agentix-direct", input="I am Ada.", conversation=conversation)
        assert (first.status, first.output_text) == ("completed", "Hello Ada.")
        assert first.conversation is not None and first.conversation.id == conversation
        client = await native(stack, "conv-user")
        await run_state(client, first.id.removeprefix("resp_"), {"succeeded"})  # its answer is written
        second = await ai.responses.create(model="agentix-direct", conversation={"id": conversation},
                                           input=[{"role": "user", "content": "Who am I?"}])
    assert second.output_text == "You are Ada."
    given = [{"role": m["role"], "content": m["content"]} for m in scripted.requests()[-1]["body"]["messages"]][1:]
    assert given == [{"role": "user", "content": "I am Ada."}, {"role": "assistant", "content": "Hello Ada."},
                     {"role": "user", "content": "Who am I?"}]
    await run_state(client, second.id.removeprefix("resp_"), {"succeeded"})
    said = [(m["role"], m["content"]) for m in await thread(client, conversation)]
    assert said == [("user", "I am Ada."), ("assistant", "Hello Ada."), ("user", "Who am I?"),
                    ("assistant", "You are Ada.")]


async def test_another_users_or_an_unknown_conversation_is_a_404(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    theirs = await _conversation(stack, "conv-owner")
    async with sdk(stack, "conv-stranger") as ai:
        for conversation in (theirs, "c_nobody", "new"):
            with pytest.raises(openai.NotFoundError):
                await ai.responses.create(model="agentix-direct", input="Hi", conversation=conversation)
    assert scripted.requests() == []


@pytest.mark.parametrize(("param", "code", "extra"), [
    ("conversation", "invalid_value", {"previous_response_id": "resp_t_x"}),
    ("instructions", "unsupported_parameter", {"instructions": "Be brief."}),
    ("input", "unsupported_parameter", {"input": [{"role": "user", "content": "Hi"},
                                                  {"role": "user", "content": "Again"}]}),
    ("tools", "unsupported_parameter", {"tools": [{"type": "function", "name": "f"}]}),
    ("store", "unsupported_parameter", {"store": False}),  # a conversation keeps its turns
])
async def test_what_a_conversations_turn_cannot_take_is_a_400_naming_it(
    stack: ChatStack, scripted: oai.OpenAIServer, param: str, code: str, extra: dict[str, Any],
) -> None:
    conversation = await _conversation(stack, "conv-refused")
    body: dict[str, Any] = {"model": "agentix-direct", "input": "Hi", "conversation": conversation, **extra}
    async with sdk(stack, "conv-refused") as ai:
        with pytest.raises(openai.BadRequestError) as refused:
            await ai.responses.create(**body)
    assert (refused.value.param, refused.value.code) == (param, code)
    assert scripted.requests() == []
