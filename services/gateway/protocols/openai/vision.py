"""Whether the model that will answer takes images, for `/v1` requests with image parts (chat
`image_url`, Responses `input_image`). The answering model is the failover chain's — every model
of it, as any of them may answer a run — or, while no chain is set, the dispatchers' built-in
one. A model says it takes images with `params.vision: true` (admin models; the built-in one:
`AGENTIX_LLM_VISION`); the offline model never does. A request with images for a model that does
not take them is a 400 naming the first image part, before anything runs."""

from __future__ import annotations

from sqlmodel import Session

from services.gateway.admin.control_publisher import current_chain
from services.gateway.db import Database
from services.gateway.protocols.openai import params
from services.gateway.protocols.openai.request import Prompt
from shared.settings import GatewaySettings


def _chain_takes_images(session: Session, builtin: bool) -> bool:
    chain = current_chain(session)
    if chain is None or not chain.active:
        return builtin
    names = [chain.active, *chain.fallbacks]
    if any(name not in chain.models for name in names):
        return False  # the offline model (chained without a row of its own) reads text only
    return all(model.params.vision for model in chain.ordered())


async def check_images(db: Database, settings: GatewaySettings, prompt: Prompt) -> None:
    """A 400 naming the first image part when the answering model does not take images."""
    if not prompt.image_parts:
        return
    builtin = bool(settings.llm_vision)
    if not await db.run(_chain_takes_images, builtin):
        raise params.unsupported(prompt.image_parts[0], "the model answering does not take images (a model "
                                                        "that does is configured with `params.vision: true`).")
