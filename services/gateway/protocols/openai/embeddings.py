"""`POST /v1/embeddings`: texts as vectors by the embedder the knowledge bases use, asked over
NATS (the `embed` tool of tools-go), in OpenAI's list shape. `encoding_format` `float` or
`base64` (little-endian float32, what the `openai` SDK asks for by default). Token-id input and
`dimensions` other than the embedder's are a 400 naming them."""

from __future__ import annotations

import base64
import struct
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from services.gateway.access.principal import Principal
from services.gateway.problems import ApiProblem
from shared.bus import Bus
from shared.bus.tools import ToolClient
from shared.contract.tools import ToolMeta

MAX_INPUTS = 2048


class EmbeddingRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    input: str | list[str] | list[int] | list[list[int]]
    model: str = Field(min_length=1, max_length=200)
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(default=None, ge=1)
    user: str | None = None


def _refuse(param: str, message: str) -> ApiProblem:
    return ApiProblem(400, "Bad Request", message,
                      errors=[{"code": "unsupported_parameter", "message": message, "field": param}])


def texts_of(body: EmbeddingRequest) -> list[str]:
    texts = [body.input] if isinstance(body.input, str) else body.input
    if not texts:
        raise ApiProblem(400, "Bad Request", "`input` is empty.",
                         errors=[{"code": "invalid_value", "message": "empty", "field": "input"}])
    if not all(isinstance(t, str) for t in texts):
        raise _refuse("input", "`input` as token ids is not supported: send the text.")
    if len(texts) > MAX_INPUTS:
        raise _refuse("input", f"`input` takes at most {MAX_INPUTS} texts.")
    return [str(t) for t in texts]


def _encoded(vector: list[float], encoding: str) -> list[float] | str:
    if encoding == "float":
        return vector
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


async def embeddings(bus: Bus, user: Principal, body: EmbeddingRequest) -> dict[str, Any]:
    texts = texts_of(body)
    meta = ToolMeta(user_id=user.id, admin=user.is_admin)
    reply = await ToolClient(bus, services=("go",)).call("embed", {"texts": texts, "user_id": user.id}, meta,
                                                         timeout_s=60.0)
    if not reply.ok:
        code = reply.error.code if reply.error else "error"
        message = reply.error.message if reply.error else "the embedder failed"
        raise ApiProblem(503 if code in ("unavailable", "unknown_tool", "timeout") else 502, "Embeddings failed",
                         f"The embedding model failed: {message}", type_=code)
    out: dict[str, Any] = reply.result
    vectors: list[list[float]] = out["vectors"]
    dim = len(vectors[0]) if vectors else 0
    if body.dimensions is not None and body.dimensions != dim:
        raise _refuse("dimensions", f"the embedder `{out['model']}` gives {dim} dimensions; "
                                    f"`dimensions` {body.dimensions} is not supported.")
    tokens = sum(max(1, len(t) // 4) for t in texts)  # an estimate: the embedder reports none
    return {"object": "list", "model": out["model"],
            "data": [{"object": "embedding", "index": i, "embedding": _encoded(v, body.encoding_format)}
                     for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
