"""Which nodes may run next: the ready set, dead paths and joins (DSL.md "How a graph runs").

An edge is *live* when its source finished (for a branch: the edge carries the chosen handle,
else `default` when no edge carries it, else none) and *dead* when its source was skipped or the
branch chose another handle. A node is ready once every incoming edge is settled and one is live
(or it has none); a node whose incoming edges are all dead is skipped, and so on downstream.

Pure bookkeeping over the plan and the checkpoint: no I/O, no asyncio. Skipped nodes are written
to the checkpoint and listed in `skipped` until the runner has announced them."""

from __future__ import annotations

from collections import deque

from services.dispatcher.engine.checkpoint import Checkpoint, NodeState
from services.dispatcher.engine.compile import Plan, PlanNode


class Frontier:
    def __init__(self, plan: Plan, cp: Checkpoint) -> None:
        self.nodes = plan.nodes
        self.cp = cp
        self.ready: deque[str] = deque()
        self.skipped: list[str] = []  # skipped since the runner last looked
        self._settled: dict[str, int] = {}  # incoming edges whose source finished or was skipped
        self._live: dict[str, int] = {}  # … of which live
        # Only nodes not finished yet (a resume restores the others) take part.
        pending: list[str] = []
        for node_id in plan.order:
            if cp.finished(node_id) or node_id in cp.waiting:
                continue
            settled = live = 0
            for edge in self.nodes[node_id].in_edges:
                if cp.finished(edge.source):
                    settled += 1
                    live += self._edge_live(self.nodes[edge.source], edge.handle)
            self._settled[node_id], self._live[node_id] = settled, live
            pending.append(node_id)
        for node_id in pending:
            self._check(node_id)

    def finished(self, node_id: str) -> None:
        """`node_id` finished (done, or failed with `on_error: continue`): settle its out-edges."""
        pn = self.nodes[node_id]
        settled, live = self._settled, self._live
        for edge in pn.out_edges:
            target = edge.target
            if target not in settled:
                continue
            settled[target] += 1
            live[target] += self._edge_live(pn, edge.handle)
            self._check(target)

    def _check(self, node_id: str) -> None:
        pn = self.nodes[node_id]
        if self._settled[node_id] < len(pn.in_edges):
            return
        if self._live[node_id] or not pn.in_edges:
            self.ready.append(node_id)
        else:
            self.cp.nodes[node_id] = NodeState(status="skipped")
            self.skipped.append(node_id)
            self.finished(node_id)  # a skipped node's out-edges are settled, dead

    def _edge_live(self, source: PlanNode, handle: str | None) -> bool:
        state = self.cp.nodes[source.id]
        if state.status == "skipped":
            return False
        if source.handles is None:
            return True
        chosen = state.output if isinstance(state.output, str) else None
        if chosen is not None and chosen in source.out_handles:
            return handle == chosen
        return handle == "default"
