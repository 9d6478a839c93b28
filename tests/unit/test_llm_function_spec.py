"""Tool descriptors → OpenAI function specs without the injected parameters."""

from __future__ import annotations

from services.dispatcher.llm.react import function_spec
from shared.contract.tools import ToolDescriptor


def test_injected_parameters_are_removed_from_schema_and_required() -> None:
    tool = ToolDescriptor(
        name="kb_search",
        title="KB search",
        description="Search a knowledge base.",
        service="go",
        inject=["user_id", "kb"],
        input_schema={
            "title": "Args",
            "type": "object",
            "required": ["query", "kb", "user_id"],
            "properties": {
                "query": {"type": "string"},
                "kb": {"type": "string"},
                "user_id": {"type": "string"},
                "top_k": {"type": "integer"},
            },
        },
    )
    spec = function_spec(tool)
    assert spec["type"] == "function" and spec["function"]["name"] == "kb_search"
    params = spec["function"]["parameters"]
    assert set(params["properties"]) == {"query", "top_k"} and params["required"] == ["query"]
    assert "title" not in params
    assert set(tool.input_schema["properties"]) == {"query", "kb", "user_id", "top_k"}  # not mutated


def test_empty_schema_and_all_injected() -> None:
    bare = function_spec(ToolDescriptor(name="now", title="Now", description="", service="py"))
    assert bare["function"]["parameters"] == {"type": "object", "properties": {}}
    assert bare["function"]["description"] == "Now"
    only = function_spec(
        ToolDescriptor(
            name="me",
            title="Me",
            description="d",
            service="go",
            inject=["user_id"],
            input_schema={"type": "object", "required": ["user_id"], "properties": {"user_id": {"type": "string"}}},
        )
    )
    assert only["function"]["parameters"] == {"type": "object", "properties": {}}
