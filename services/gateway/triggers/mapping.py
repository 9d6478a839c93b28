"""An inbound webhook's input mapping: each input field of the workflow taken from the call by a
path — `$.body.order.id`, `$.body.items[0].sku`, `$.headers.x-event`, `$.query.ref` — or `$.body`
for the whole body. Pure. A path that finds nothing is an error naming the field and the path."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from shared.errors import AgentixError

_STEP = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")
ROOTS = ("body", "headers", "query")


class MappingError(AgentixError, ValueError):
    """A hook's input mapping that cannot be applied to a call (a bad path, or nothing found)."""

    code = "hook_mapping"
    http_status = 422


def _steps(path: str) -> list[str | int]:
    if not path.startswith("$"):
        raise MappingError(f"path {path!r} must start with $")
    rest, steps, pos = path[1:], [], 0
    while pos < len(rest):
        m = _STEP.match(rest, pos)
        if m is None:
            raise MappingError(f"path {path!r} is not of the form $.body.a.b[0]")
        steps.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    if not steps or steps[0] not in ROOTS:
        raise MappingError(f"path {path!r} must start with $.body, $.headers or $.query")
    return steps


def check_mapping(mapping: Mapping[str, str]) -> None:
    """Refuse a mapping with a malformed path (at the hook's creation)."""
    for field, path in mapping.items():
        try:
            _steps(path)
        except MappingError as exc:
            raise MappingError(f"input_mapping.{field}: {exc}") from None


def map_input(mapping: Mapping[str, str], body: Any, headers: Mapping[str, str],
              query: Mapping[str, str]) -> dict[str, Any]:  # fmt: skip
    """The workflow input of one call; headers are matched case-insensitively."""
    roots: dict[str, Any] = {"body": body, "headers": {k.lower(): v for k, v in headers.items()}, "query": dict(query)}
    out: dict[str, Any] = {}
    for field, path in mapping.items():
        steps = _steps(path)
        value: Any = roots[str(steps[0])]
        for step in steps[1:]:
            if steps[0] == "headers" and isinstance(step, str):
                step = step.lower()
            try:
                value = value[step]
            except (KeyError, IndexError, TypeError):
                raise MappingError(f"input `{field}`: {path} finds nothing in the call") from None
        out[field] = value
    return out
