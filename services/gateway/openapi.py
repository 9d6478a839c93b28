"""OpenAPI document: every error is declared as RFC 9457 problem+json (the shape the gateway
actually sends), instead of FastAPI's default validation-error schema."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from services.gateway.middleware.auth import API_PREFIX, PUBLIC

PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "title", "status", "detail", "instance"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "instance": {"type": "string"},
        "request_id": {"type": ["string", "null"]},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "node_id": {"type": "string"},
                    "edge_index": {"type": "integer"},
                    "field": {"type": "string"},
                    "position": {"type": "integer", "description": "malformed JSON: character offset"},
                },
            },
        },
    },
}
PROBLEM_CONTENT = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}


def install_openapi(app: FastAPI) -> None:
    def build() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        components = doc.setdefault("components", {}).setdefault("schemas", {})
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)
        components["Problem"] = PROBLEM_SCHEMA
        for path, path_item in doc.get("paths", {}).items():
            for operation in path_item.values():
                if not path.startswith(API_PREFIX) or path in PUBLIC:
                    operation["security"] = []  # operations routes and login need no token
                responses = operation.setdefault("responses", {})
                for code, response in list(responses.items()):
                    if code.isdigit() and int(code) >= 400:
                        description = response.get("description") or "problem"
                        responses[code] = {"description": description, "content": PROBLEM_CONTENT}
                responses["default"] = {"description": "an error, as problem details", "content": PROBLEM_CONTENT}
        doc.setdefault("components", {})["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
        }
        doc["security"] = [{"bearer": []}]
        app.openapi_schema = doc
        return doc

    app.openapi = build  # type: ignore[method-assign]
