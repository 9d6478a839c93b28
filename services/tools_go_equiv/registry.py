"""The tools_go_equiv registry: each module under `tools/` declares its tools on it, with MCP's
annotations from the kinds below (every tool here acts on Agentix's own data only, so none is
open-world). Its `list_tools` also lists the tools the MCP bridge serves (`with_bridged`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from shared.bus.tools import ToolRegistry
from shared.contract.tools import ToolAnnotations, ToolDescriptor

registry = ToolRegistry("go")

# Searches and reads: change nothing.
READS = ToolAnnotations(read_only=True, open_world=False)
# Creates something new on every call (a second call makes a second one).
ADDS = ToolAnnotations(read_only=False, destructive=False, idempotent=False, open_world=False)
# Creates or derives something once: the same arguments again change nothing more (a duplicate
# document is a no-op, an existing name a conflict, a rendered file is kept).
ADDS_ONCE = ToolAnnotations(read_only=False, destructive=False, idempotent=True, open_world=False)
# Replaces what was stored under the same key.
OVERWRITES = ToolAnnotations(read_only=False, destructive=True, idempotent=True, open_world=False)
# Deletes; deleting again finds nothing to delete.
DELETES = ToolAnnotations(read_only=False, destructive=True, idempotent=True, open_world=False)
# Adds a message and, past the history's cap, drops the oldest one.
APPENDS_CAPPED = ToolAnnotations(read_only=False, destructive=True, idempotent=False, open_world=False)


@dataclass
class BridgedRegistry(ToolRegistry):
    """This service's own tools plus, in `list_tools`, the external ones of the MCP bridge
    (service `mcp`, so callers send their calls to the bridge's subjects)."""

    bridged: Callable[[], list[ToolDescriptor]] = field(default=lambda: [])

    def descriptors(self) -> list[ToolDescriptor]:
        return super().descriptors() + self.bridged()


def with_bridged(bridged: Callable[[], list[ToolDescriptor]]) -> BridgedRegistry:
    """The registry to serve: the same tool specs, and the bridge's tools listed with them."""
    return BridgedRegistry(service=registry.service, specs=registry.specs, bridged=bridged)
