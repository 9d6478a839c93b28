"""Agentix as an OpenAI-compatible server: `/v1/models` and `/v1/chat/completions` over the
conversation runtime, so the `openai` SDK (or any chat UI that takes a base URL) talks to the
assistants of Agentix with the API's bearer token as its API key (see docs/API.md)."""

from fastapi import FastAPI

from services.gateway.protocols.openai.routes import router
from services.gateway.routing import add_routes


def mount_openai(app: FastAPI) -> None:
    """Serve the OpenAI-compatible routes at `/v1`."""
    add_routes(app, router)


__all__ = ["mount_openai"]
