"""The tier-1 guardrail on a LangGraph run's question, as the API applies it to a chat message:
block → 400 problem, grey → the rules go with the run; either is recorded."""

from __future__ import annotations

from fastapi import Request

from services.gateway.access.admission import check_text


async def check_question(request: Request, text: str) -> list[str]:
    """The grey rules the question matched (empty when clean); raises when it is blocked."""
    return await check_text(request.app.state, request.scope, [text], "run's input")
