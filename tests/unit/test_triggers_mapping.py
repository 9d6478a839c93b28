"""A hook's input mapping: body, headers (any case) and query to the workflow input."""

from __future__ import annotations

import pytest

from services.gateway.triggers.mapping import MappingError, check_mapping, map_input

BODY = {"order": {"id": 7, "items": [{"sku": "a1"}, {"sku": "b2"}]}}


def test_paths_from_body_headers_and_query() -> None:
    mapping = {"id": "$.body.order.id", "sku": "$.body.order.items[1].sku", "event": "$.headers.X-Event",
               "ref": "$.query.ref", "all": "$.body"}  # fmt: skip
    got = map_input(mapping, BODY, {"x-event": "paid"}, {"ref": "r9"})
    assert got == {"id": 7, "sku": "b2", "event": "paid", "ref": "r9", "all": BODY}


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("$.body.order.missing", "finds nothing"),
        ("$.body.order.items[5]", "finds nothing"),
        ("$.body.order.id.deeper", "finds nothing"),
    ],
)
def test_a_path_that_finds_nothing_names_the_field(path: str, reason: str) -> None:
    with pytest.raises(MappingError, match=f"input `x`: .*{reason}"):
        map_input({"x": path}, BODY, {}, {})


@pytest.mark.parametrize("path", ["body.a", "$.cookies.a", "$", "$.body..a", "$.body[x]"])
def test_malformed_paths_refused_at_creation(path: str) -> None:
    with pytest.raises(MappingError, match=r"input_mapping\.x"):
        check_mapping({"x": path})
