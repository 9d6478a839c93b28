"""The four services (gateway, dispatcher, tools_go_equiv, tools_py): each runs as its own
process, and they share only `shared/`."""

from shared.nats_import import import_nats_without_aiohttp

import_nats_without_aiohttp()
