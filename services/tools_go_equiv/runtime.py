"""What the tools of this service share while it runs: the bus, the database, embedders, the
vector cache, Redis (optional) and a tool client. Set once by `main.run`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.tools_go_equiv.db.engine import Db
from services.tools_go_equiv.kb.embed import Embedders
from services.tools_go_equiv.kb.llm_facts import LlmFactExtractor
from services.tools_go_equiv.kb.search import Searcher
from services.tools_go_equiv.kb.vectors import VectorCache
from shared.bus import Bus
from shared.bus.tools import ToolClient
from shared.contract.ingest import KbChanged
from shared.installed import Installed
from shared.settings import ToolsGoSettings

if TYPE_CHECKING:
    from redis.asyncio import Redis


@dataclass
class Runtime:
    settings: ToolsGoSettings  # the KB knobs too (`kb_…`)
    bus: Bus
    db: Db
    embedders: Embedders
    vectors: VectorCache
    searcher: Searcher
    tools: ToolClient
    redis: Redis | None = None
    fact_model: LlmFactExtractor | None = None  # facts from a model at ingest, when configured
    counters: dict[str, Any] = field(default_factory=dict)

    async def kb_changed(self, kb_id: str, revision: int, reason: str) -> None:
        """Tell every replica (this one included, through the same subscription)."""
        self.vectors.invalidate(kb_id)
        change = KbChanged(kb=kb_id, revision=revision, reason=reason)
        await self.bus.publish(self.bus.subjects.kb_changed(kb_id), change)


_installed: Installed[Runtime] = Installed("tools_go_equiv runtime")
install = _installed.install
get = _installed.get
