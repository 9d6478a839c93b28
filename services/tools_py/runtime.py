"""What the tools of this service share while it runs: its settings and `code_exec`'s sandbox,
with the slots that bound how many programs run at once. Made from the settings the service
was started with, and set once by `main.run` (nothing is configured at import)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from services.tools_py.sandbox import Sandbox
from shared.installed import Installed
from shared.settings import ToolsPySettings


@dataclass
class Runtime:
    settings: ToolsPySettings
    sandbox: Sandbox
    code_slots: asyncio.Semaphore  # `sandbox_concurrency` programs at once; more wait their turn

    @classmethod
    def from_settings(cls, settings: ToolsPySettings) -> Runtime:
        return cls(settings, Sandbox(settings.sandbox_base_dir), asyncio.Semaphore(settings.sandbox_concurrency))


_installed: Installed[Runtime] = Installed("tools_py runtime")
install = _installed.install
get = _installed.get
