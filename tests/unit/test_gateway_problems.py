"""Validation errors as problem+json items: a malformed body names the character where parsing
stopped as `position` (never as a field), a schema error names its field; the input never shows."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from services.gateway.problems import validation_items, validation_problem


class Doc(BaseModel):
    title: str
    size: int


def errors_of(raw: str) -> list[dict]:
    with pytest.raises(ValidationError) as caught:
        Doc.model_validate_json(raw)
    return caught.value.errors(include_input=False)


def test_fastapi_json_offset_is_a_position_not_a_field() -> None:
    # What FastAPI reports for `{"title": "x",}`: the offset sits in `loc` after "body".
    fastapi_error = {
        "type": "json_invalid",
        "loc": ("body", 15),
        "msg": "JSON decode error",
        "input": {},
        "ctx": {"error": "Expecting property name enclosed in double quotes"},
    }
    [item] = validation_items([fastapi_error])
    assert item == {
        "code": "json_invalid",
        "position": 15,
        "message": "JSON decode error at character 15: Expecting property name enclosed in double quotes",
    }


def test_malformed_json_from_pydantic_has_no_empty_field_and_is_400() -> None:
    problem = validation_problem(errors_of('{"title": "secret-value", '), "Send {title, size}.")
    assert problem.status == 400 and problem.title == "Malformed JSON"
    [item] = problem.errors or []
    assert item["code"] == "json_invalid" and "field" not in item and "position" not in item
    assert "secret-value" not in item["message"]


def test_a_schema_error_names_its_field_and_is_422() -> None:
    problem = validation_problem(errors_of('{"title": "secret-value", "size": "big"}'), "Send {title, size}.")
    assert problem.status == 422 and problem.detail == "Send {title, size}."
    assert problem.errors == [{"code": "int_parsing", "field": "size", "message": problem.errors[0]["message"]}]
    assert "big" not in problem.errors[0]["message"]
