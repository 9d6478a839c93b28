"""The tools_py registry: each tool module under `tools/` declares its tools on it, with MCP's
annotations (nothing here reaches the network, so none is open-world)."""

from __future__ import annotations

from shared.bus.tools import ToolRegistry
from shared.contract.tools import ToolAnnotations

registry = ToolRegistry("py")

# Pure functions of their input: parse and answer, store nothing.
READS = ToolAnnotations(read_only=True, open_world=False)
# Runs an arbitrary program in a throw-away sandbox without network: it says nothing about
# read-only or idempotent (the program decides), and nothing it writes outlives the call.
RUNS_CODE = ToolAnnotations(read_only=False, destructive=False, open_world=False)
