"""The tools_py registry: each tool module under `tools/` declares its tools on it."""

from __future__ import annotations

from shared.bus.tools import ToolRegistry

registry = ToolRegistry("py")
