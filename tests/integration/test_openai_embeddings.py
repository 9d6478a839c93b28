"""`POST /v1/embeddings` through the real `openai` SDK against a gateway and the real tools-go
service over NATS: the knowledge bases' embedder (the local one here) answers, as floats and as
the SDK's default base64; token ids and other `dimensions` are a 400 naming them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np
import openai
import pytest
from openai import AsyncOpenAI

from shared.auth_tokens import mint_token
from tests.conftest import make_settings
from tests.integration.chat_support import ChatStack, chat_stack
from tests.support.nats_server import NatsServer


@pytest.fixture
async def stack(nats_server: NatsServer, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ChatStack]:
    settings = make_settings(nats_server.url, tmp_path_factory.mktemp("emb") / "data", kb_embed_dim=64)
    async with chat_stack(settings, with_dispatcher=False, real_tools=True) as chat:
        yield chat


async def test_embeddings_come_from_the_knowledge_bases_embedder(stack: ChatStack) -> None:
    ai = AsyncOpenAI(base_url=f"{stack.gateways[0].url}/v1", api_key=mint_token(stack.settings, "emb-user"),
                     max_retries=0)
    async with ai:
        texts = ["The cat sat on the mat.", "A cat was sitting on a mat.", "Quarterly revenue grew by 4%."]
        floats = await ai.embeddings.create(model="agentix-embed", input=texts, encoding_format="float")
        default = await ai.embeddings.create(model="agentix-embed", input=texts)  # the SDK asks for base64
        single = await ai.embeddings.create(model="agentix-embed", input="The cat sat on the mat.")
        assert floats.model == "local-hash-v1:64"
        assert [d.index for d in floats.data] == [0, 1, 2]
        vectors = np.array([d.embedding for d in floats.data])
        assert vectors.shape == (3, 64)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        assert np.allclose(np.array([d.embedding for d in default.data]), vectors, atol=1e-6)
        assert np.allclose(single.data[0].embedding, vectors[0], atol=1e-6)
        similar, unrelated = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
        assert similar > unrelated
        assert floats.usage.prompt_tokens > 0

        with pytest.raises(openai.BadRequestError) as tokens:
            await ai.embeddings.create(model="agentix-embed", input=[[101, 202]])
        assert tokens.value.param == "input"
        with pytest.raises(openai.BadRequestError) as dims:
            await ai.embeddings.create(model="agentix-embed", input="x", dimensions=8)
        assert dims.value.param == "dimensions"
