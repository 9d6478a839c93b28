"""The MCP bridge's pure parts: MCP tools → descriptors (namespacing, annotations, the admin's
filters and high-risk list), MCP results → tool replies, the status summary over replicas, and
the admin API's validation of a server."""

from __future__ import annotations

import mcp_types
import pytest
from pydantic import ValidationError

from services.gateway.admin.mcp_servers import McpServerIn
from services.gateway.admin.status import mcp_servers
from services.tools_go_equiv.mcp_bridge.convert import descriptor, reply, servable
from shared.contract.mcp import McpServerConfig

CALC = McpServerConfig(name="calc", url="http://h/mcp", deny=["drop"], high_risk=["wipe"])


def tool(name: str, **kw: object) -> mcp_types.Tool:
    return mcp_types.Tool(name=name, input_schema={"type": "object", "properties": {}}, **kw)  # type: ignore[arg-type]


def test_descriptors_are_namespaced_and_carry_the_servers_hints_but_not_its_word_on_risk() -> None:
    hints = mcp_types.ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=True)
    d = descriptor(CALC, tool("add", title="Add", description="Add numbers.", annotations=hints))
    assert (d.name, d.service, d.title, d.description) == ("calc.add", "mcp", "Add", "Add numbers.")
    assert d.annotations.read_only is True and d.annotations.destructive is False
    assert d.annotations.open_world is True and d.annotations.idempotent is None
    assert not d.high_risk and d.agent
    bare = descriptor(CALC, tool("wipe", annotations=mcp_types.ToolAnnotations(title="Wipe all")))
    assert bare.high_risk and bare.title == "Wipe all" and bare.description == "Wipe all"
    assert descriptor(CALC, tool("x")).title == "x"


def test_only_allowed_tools_with_subject_safe_names_are_served() -> None:
    assert servable(CALC, "add") and servable(CALC, "fs.read") and servable(CALC, "a-b_c")
    assert not servable(CALC, "drop")  # denied
    for bad in ("has space", "a*", "a>", "a..b", ".a", "a.", ""):
        assert not servable(CALC, bad), bad
    only = CALC.model_copy(update={"allow": ["add", "drop"]})
    assert servable(only, "add") and not servable(only, "mul") and not servable(only, "drop")  # deny wins


def text(t: str) -> mcp_types.TextContent:
    return mcp_types.TextContent(type="text", text=t)


def test_results_become_replies() -> None:
    structured = mcp_types.CallToolResult(content=[text("5")], structured_content={"result": 5})
    assert reply("calc.add", structured).result == {"result": 5}
    plain = mcp_types.CallToolResult(content=[text("a"), text("b")])
    assert reply("calc.add", plain).result == "a\nb"
    failed = reply("calc.add", mcp_types.CallToolResult(content=[text("bad input")], is_error=True))
    assert not failed.ok and failed.error.code == "tool_error" and failed.error.message == "calc.add: bad input"
    image = mcp_types.ImageContent(type="image", data="aGk=", mime_type="image/png")
    blocks = reply("calc.img", mcp_types.CallToolResult(content=[text("see"), image])).result
    assert [b["type"] for b in blocks] == ["text", "image"]


def beat(instance: str, servers: list[dict], disabled: list[str] | None = None) -> dict:
    report = {"servers": servers, "disabled": disabled or []}
    return {"service": "tools-go", "instance": instance, "detail": {"mcp": report}}


def test_status_sums_the_bridges_of_every_replica() -> None:
    up = {"name": "calc", "url": "u", "connected": True, "tools": 2, "calls": 3, "errors": 1, "avg_latency_ms": 2.0}
    down = {"name": "calc", "url": "u", "connected": False, "tools": 2, "calls": 1, "errors": 1,
            "avg_latency_ms": 6.0, "last_error": "ConnectError: refused"}  # fmt: skip
    other = {"service": "dispatcher", "instance": "d1", "detail": {"mcp": {"servers": [up]}}}
    [calc, off] = mcp_servers([beat("a", [up]), beat("b", [down], ["off"]), other])
    assert calc["state"] == "degraded" and not calc["connected"]
    assert (calc["bridges"], calc["connected_bridges"], calc["tools"]) == (2, 1, 2)
    assert (calc["calls"], calc["errors"], calc["avg_latency_ms"]) == (4, 2, 3.0)
    assert calc["last_error"] == "ConnectError: refused"
    assert off == {"name": "off", "state": "disabled", "connected": False, "bridges": 0, "tools": 0}
    assert mcp_servers([beat("a", [up])])[0]["state"] == "connected"
    assert mcp_servers([beat("a", [down])])[0]["state"] == "down"


@pytest.mark.parametrize(
    "fields",
    [
        {"name": "Calc"},
        {"name": "ca.lc"},
        {"url": "ftp://h/mcp"},
        {"headers": {"Bad Name": "x"}},
        {"headers": {"X-Ok": "line\nbreak"}},
        {"allow_tools": [""]},
        {"surprise": True},
    ],
)
def test_the_admin_api_refuses_bad_servers(fields: dict) -> None:
    with pytest.raises(ValidationError):
        McpServerIn.model_validate({"name": "calc", "url": "http://h/mcp", **fields})


def test_the_admin_api_takes_a_good_server() -> None:
    ok = McpServerIn.model_validate(
        {"name": "calc_2", "url": "https://h/mcp", "headers": {"Authorization": "Bearer t"}, "deny_tools": ["a", "a"]}
    )
    assert ok.deny_tools == ["a"] and ok.headers == {"Authorization": "Bearer t"}
