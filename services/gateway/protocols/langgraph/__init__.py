"""The LangGraph Agent Server API at `/lg`, over conversations (see docs/API.md, "LangGraph"):
`langgraph_sdk.get_client(url="http://host:port/lg")` works against Agentix."""

from fastapi import FastAPI

from services.gateway.protocols.langgraph import assistant_routes, cron_routes, store_routes
from services.gateway.protocols.langgraph.routes import PREFIX, router
from services.gateway.routing import add_routes


def mount_langgraph(app: FastAPI) -> None:
    add_routes(app, router)
    add_routes(app, assistant_routes.router)
    add_routes(app, store_routes.router)
    add_routes(app, cron_routes.router)


__all__ = ["PREFIX", "mount_langgraph"]
