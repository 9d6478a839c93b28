"""`embed`: texts as vectors with the embedder new knowledge bases are built with (the remote
model of `AGENTIX_KB_EMBED_MODEL` when one is configured, else the local hashed one) — what
`POST /v1/embeddings` serves. Not offered to agents."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from services.tools_go_equiv import runtime
from services.tools_go_equiv.kb.embed import EmbedderUnavailable
from services.tools_go_equiv.registry import READS, registry
from services.tools_go_equiv.tools.common import UserArgs, user_of
from shared.bus.tools import ToolContext, ToolFailure

MAX_TEXTS = 2048
MAX_TEXT_CHARS = 32_000


class EmbedArgs(UserArgs):
    texts: list[str] = Field(min_length=1, max_length=MAX_TEXTS,
                             description=f"up to {MAX_TEXTS} texts of up to {MAX_TEXT_CHARS} characters")


@registry.tool(
    name="embed",
    title="Embed texts",
    description="Vectors of texts, by the knowledge bases' embedder (L2-normalised, one per text).",
    agent=False,
    inject=("user_id",),
    annotations=READS,
)
async def embed(args: EmbedArgs, ctx: ToolContext) -> dict[str, Any]:
    user_of(args, ctx)  # never anonymous, as every tool here
    too_long = next((i for i, t in enumerate(args.texts) if len(t) > MAX_TEXT_CHARS), None)
    if too_long is not None:
        raise ToolFailure("bad_arguments", f"texts[{too_long}] is longer than {MAX_TEXT_CHARS} characters")
    embedder = runtime.get().embedders.default
    try:
        matrix = await embedder.embed(args.texts)
    except EmbedderUnavailable as exc:
        raise ToolFailure("unavailable", str(exc)) from exc
    return {"model": embedder.name, "vectors": [[float(x) for x in row] for row in matrix]}
