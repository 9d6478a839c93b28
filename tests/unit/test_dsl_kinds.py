"""The canvas's node catalog (GET /api/v1/dsl/kinds) says what the validator enforces: its config
schemas come from the same models, so a config the validator refuses for a missing field is one
the schema calls incomplete, and every config of the examples satisfies its kind's schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema.validators import validator_for

from shared.contract.dsl import NODE_KINDS
from shared.contract.kinds import kinds_catalog
from shared.contract.validate import validate_dsl

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_every_kind_is_listed_once_in_the_dsl_order() -> None:
    assert [k["kind"] for k in kinds_catalog()] == list(NODE_KINDS)
    for entry in kinds_catalog():
        assert entry["label"] and entry["description"] and entry["icon"]
        validator_for(entry["config_schema"]).check_schema(entry["config_schema"])


def test_handles_branch_true_false_output_none_others_one() -> None:
    by_kind = {k["kind"]: k for k in kinds_catalog()}
    assert by_kind["branch"]["outputs"] == ["true", "false"] and by_kind["branch"]["case_handles"]
    assert by_kind["output"]["outputs"] == []
    assert by_kind["input"]["inputs"] == 0
    assert all(by_kind[k]["outputs"] == [""] for k in NODE_KINDS if k not in {"branch", "output"})


@pytest.mark.parametrize("kind", NODE_KINDS)
def test_required_fields_are_the_ones_the_validator_asks_for(kind: str) -> None:
    schema = next(k for k in kinds_catalog() if k["kind"] == kind)["config_schema"]
    doc = {"version": "1", "nodes": [{"id": "n", "kind": kind, "config": {}}], "edges": []}
    missing = {p.field.removeprefix("config.") for p in validate_dsl(doc).errors
               if p.code == "bad_config" and p.message.endswith(": required")}
    assert missing == set(schema.get("required", []))


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.json")))
def test_the_examples_configs_satisfy_their_kinds_schema(example: str) -> None:
    schemas = {k["kind"]: k["config_schema"] for k in kinds_catalog()}
    for node in json.loads((EXAMPLES / example).read_text())["nodes"]:
        schema = schemas[node["kind"]]
        errors = list(validator_for(schema)(schema).iter_errors(node.get("config", {})))
        assert not errors, f"{example} {node['id']}: {[e.message for e in errors]}"
    assert validate_dsl((EXAMPLES / example).read_text()).ok
