"""The LangGraph Agent Server API at `/lg`, over conversations (see docs/API.md, "LangGraph"):
`langgraph_sdk.get_client(url="http://host:port/lg")` works against Agentix."""

from fastapi import FastAPI

from services.gateway.langgraph.routes import router

PREFIX = "/lg"


def mount_langgraph(app: FastAPI) -> None:
    app.include_router(router, prefix=PREFIX)


__all__ = ["PREFIX", "mount_langgraph"]
