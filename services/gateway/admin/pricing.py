"""Per-model prices (per 1K prompt / completion tokens)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session

from services.gateway.admin.control_publisher import PRICING_KEY, bump, current_pricing
from services.gateway.problems import ApiProblem
from shared.contract.models import PriceEntry


class PricingIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    models: dict[str, PriceEntry] = Field(default_factory=dict)


def get(session: Session) -> dict[str, Any]:
    pricing = current_pricing(session)
    return pricing.model_dump(mode="json") if pricing else {"revision": 0, "models": {}}


def put(session: Session, body: PricingIn, by: str) -> int:
    for name, entry in body.models.items():
        if entry.prompt_per_1k < 0 or entry.completion_per_1k < 0 or len(name) > 100:
            raise ApiProblem(422, "Invalid request", f"Prices of {name!r} must be non-negative.")
    return bump(session, PRICING_KEY, {"models": {k: v.model_dump() for k, v in body.models.items()}}, by)
