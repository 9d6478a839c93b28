"""The bus layer's described failures derive from AgentixError and keep their old shape."""

from __future__ import annotations

from shared.bus import BusUnavailable
from shared.bus.tools import ToolFailure
from shared.errors import AgentixError


def test_bus_unavailable_is_still_a_connection_error() -> None:
    exc = BusUnavailable("NATS not reachable")
    assert isinstance(exc, AgentixError) and isinstance(exc, ConnectionError)
    assert (str(exc), exc.message, exc.code, exc.http_status) == ("NATS not reachable", "NATS not reachable",
                                                                  "bus_unavailable", 503)


def test_tool_failure_keeps_code_and_message() -> None:
    exc = ToolFailure("not_found", "report 'r1' not found")
    assert isinstance(exc, AgentixError)
    assert (exc.code, exc.message, str(exc)) == ("not_found", "report 'r1' not found", "report 'r1' not found")
