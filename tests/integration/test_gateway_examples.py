"""Every example in `examples/` declares its input: submitted without it, the gateway answers a
422 naming the missing field before anything runs; with the schema's own example it is accepted."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from services.gateway.embedded import EmbeddedGateway
from shared.auth_tokens import mint_token

EXAMPLE_DIR = Path(__file__).resolve().parents[2] / "examples"
EXAMPLES = {p.name: json.loads(p.read_text()) for p in sorted(EXAMPLE_DIR.glob("*.json"))}


@pytest.fixture
async def alice(gw: EmbeddedGateway) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {mint_token(gw.settings, 'alice')}"}
    async with httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=10) as c:
        yield c


def _input_schema(dsl: dict) -> dict:
    return next(n for n in dsl["nodes"] if n["kind"] == "input")["config"]["schema"]


@pytest.mark.parametrize("name", EXAMPLES)
async def test_example_refuses_a_missing_field_and_takes_its_sample(alice: httpx.AsyncClient, name: str) -> None:
    dsl = EXAMPLES[name]
    schema = _input_schema(dsl)
    assert schema["required"] and schema["examples"], "every example declares its input and a sample"
    field = schema["required"][0]

    refused = await alice.post("/api/v1/tasks", json={"dsl": dsl, "input": {}})
    assert refused.status_code == 422, refused.text
    body = refused.json()
    assert body["title"] == "Invalid input" and field in body["detail"]
    assert body["errors"][0]["code"] == "bad_input" and body["errors"][0]["node_id"] == "in"

    accepted = await alice.post("/api/v1/tasks", json={"dsl": dsl, "input": schema["examples"][0]})
    assert accepted.status_code == 202, accepted.text


async def test_a_wrong_type_names_its_field(alice: httpx.AsyncClient) -> None:
    dsl = EXAMPLES["map_summaries.json"]
    refused = await alice.post("/api/v1/tasks", json={"dsl": dsl, "input": {"topics": ["ok", 7]}})
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["field"] == "input/topics/1"
