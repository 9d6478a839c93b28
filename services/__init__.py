"""The four services (gateway, dispatcher, tools_go_equiv, tools_py): each runs as its own
process, and they share only `shared/`."""

from shared.lean_imports import import_without

import_without("nats.aio.transport", "aiohttp")  # see shared/lean_imports.py
