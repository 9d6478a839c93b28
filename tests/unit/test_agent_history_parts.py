"""An agent's `history` may carry a user's content parts (text and images, as an OpenAI client
sends them): they are given to the model as they are; a malformed part fails the node."""

from __future__ import annotations

from typing import Any

import pytest

from services.dispatcher.engine.context import NodeError
from services.dispatcher.engine.nodes.agent import history_messages

PARTS: list[dict[str, Any]] = [{"type": "text", "text": "What is this?"},
                               {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]


def test_a_users_text_and_images_are_kept_as_parts() -> None:
    assert history_messages("n", [{"role": "user", "content": PARTS}]) == [{"role": "user", "content": PARTS}]


@pytest.mark.parametrize("message", [
    {"role": "user", "content": [{"type": "image_url", "image_url": {}}]},
    {"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]},
    {"role": "assistant", "content": PARTS},
])
def test_a_part_the_model_cannot_be_given_fails_the_node(message: dict[str, Any]) -> None:
    with pytest.raises(NodeError):
        history_messages("n", [message])
