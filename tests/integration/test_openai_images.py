"""Images in `/v1` requests (chat `image_url` parts, Responses `input_image`), driven by the real
`openai` SDK against a real gateway and dispatcher (the scripted model behind): they reach a
model that takes images — one chained with `params.vision: true` through the admin API — as the
chat completions' content parts, in place; a model that does not (the built-in one, not
configured with `AGENTIX_LLM_VISION`) gets a 400 naming the part, and nothing runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from tests.integration import test_openai_compat as compat
from tests.integration.chat_support import ChatStack
from tests.support import openai_server as oai

# The compatibility tests' stack (gateway, dispatcher, the scripted model), set up once per module.
srv, tools, stack, scripted, sdk = compat.srv, compat.tools, compat.stack, compat.scripted, compat.sdk

PNG = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAA"
       "BJRU5ErkJggg==")
CHAT: list[Any] = [{"role": "user", "content": [
    {"type": "text", "text": "What is in this picture?"},
    {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}}]}]
RESPONSES: list[Any] = [{"role": "user", "content": [
    {"type": "input_text", "text": "And this one?"},
    {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "auto"}]}]


@pytest.fixture
async def seeing(stack: ChatStack, srv: oai.OpenAIServer) -> AsyncIterator[None]:
    """A chain whose one model takes images (the scripted server), cleared afterwards."""
    admin = await stack.client("vision-admin", admin=True)
    made = await admin.post("/api/v1/admin/models", json={"name": "eyes", "base_url": srv.url, "model": "m",
                                                           "params": {"vision": True}})
    assert made.status_code == 201, made.text
    assert made.json()["params"]["vision"] is True
    assert (await admin.put("/api/v1/admin/models/chain", json={"active": "eyes"})).status_code == 200
    try:
        yield
    finally:
        await admin.put("/api/v1/admin/models/chain", json={"active": None, "fallbacks": []})
        await admin.delete(f"/api/v1/admin/models/{made.json()['id']}")


async def test_a_model_without_vision_refuses_images_naming_the_part(
    stack: ChatStack, scripted: oai.OpenAIServer,
) -> None:
    async with sdk(stack, "no-eyes") as ai:
        with pytest.raises(openai.BadRequestError) as chat:
            await ai.chat.completions.create(model="agentix-direct", messages=CHAT)
        with pytest.raises(openai.BadRequestError) as responses:
            await ai.responses.create(model="agentix-direct", input=RESPONSES)
    assert (chat.value.param, chat.value.code) == ("messages[0].content[1]", "unsupported_parameter")
    assert "does not take images" in str(chat.value)
    assert (responses.value.param, responses.value.code) == ("input[0].content[1]", "unsupported_parameter")
    assert scripted.requests() == []


async def test_images_reach_a_model_that_takes_them(
    stack: ChatStack, scripted: oai.OpenAIServer, seeing: None,
) -> None:
    scripted.script([oai.reply("A single pixel."), oai.reply("A cat.")])
    earlier = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    async with sdk(stack, "eyes-user") as ai:
        chat = await ai.chat.completions.create(model="agentix-direct", messages=[*earlier, *CHAT])
        assert chat.choices[0].message.content == "A single pixel."
        given = scripted.requests()[-1]["body"]["messages"][1:]
        assert given == [*earlier, {"role": "user", "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}}]}]
        answered = await ai.responses.create(model="agentix-direct", input=RESPONSES)
        assert answered.output_text == "A cat."
        given = scripted.requests()[-1]["body"]["messages"][1:]
        assert given == [{"role": "user", "content": [
            {"type": "text", "text": "And this one?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "auto"}}]}]
        items = [i async for i in ai.responses.input_items.list(answered.id, order="asc")]
    assert [p.type for p in items[0].content] == ["input_text", "input_image"]  # type: ignore[union-attr]
