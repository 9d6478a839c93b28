"""Approvals between deliveries: decisions brought by a resume message (or made by an approval's
own deadline) are applied before the graph runs on; a rejection or a timeout ends the task
`rejected`. Parking the task in `waiting` is `RunState.park`."""

from __future__ import annotations

from services.dispatcher.engine.agent_loop import ToolDecision
from services.dispatcher.engine.checkpoint import NodeState
from services.dispatcher.engine.outcome import Stop
from services.dispatcher.engine.ports import Decision
from services.dispatcher.engine.state import RunState
from shared.contract.base import utcnow
from shared.contract.events import ApprovalDecisionEvent, NodeEndEvent


def rejection(decision: Decision) -> str:
    if decision.decision == "timeout":
        return f"approval {decision.node_id!r} timed out"
    return f"approval {decision.node_id!r} rejected by {decision.by}" + (
        f": {decision.comment}" if decision.comment else "")


def timed_out(node_id: str) -> Decision:
    return Decision(node_id, "timeout", by="system", comment="approval timed out")


async def apply_decisions(run: RunState, decisions: dict[str, Decision]) -> None:
    """Decide every waiting approval that has a decision (or whose deadline passed); raises Stop
    `rejected` when one of them rejects the task."""
    cp = run.cp
    now = utcnow()
    for node_id, waiting in cp.waiting.items():
        if node_id not in decisions and waiting.deadline is not None and waiting.deadline <= now:
            decisions[node_id] = timed_out(node_id)
    rejected: list[Decision] = []
    for node_id in list(cp.waiting):
        decision = decisions.get(node_id)
        if decision is None:
            continue
        if await decide(run, node_id, decision):
            rejected.append(decision)
    if cp.waiting or rejected:
        await run.save()
    if rejected:
        first = rejected[0]
        raise Stop("rejected", rejection(first), "approval_timeout" if first.decision == "timeout" else "rejected")


async def decide(run: RunState, node_id: str, decision: Decision) -> bool:
    """Records a decision for a waiting node; True when it rejects the task. A tool approval's
    decision goes to the agent's loop, which runs again and goes on either way (a rejected call
    becomes a tool result saying so): it never ends the task."""
    cp = run.cp
    waiting = cp.waiting.pop(node_id, None)
    await run.emit(ApprovalDecisionEvent(task_id=run.task.task_id, node_id=node_id, decision=decision.decision,
                                         by=decision.by, comment=decision.comment))
    loop = cp.agents.get(node_id)
    if waiting is not None and waiting.call_id is not None and loop is not None:
        loop.decision = ToolDecision(call_id=waiting.call_id,
                                     decision="approve" if decision.decision == "approve" else "reject", by=decision.by,
                                     comment=decision.comment, args=decision.args)
        cp.nodes.pop(node_id, None)  # not finished: the scheduler runs the agent node again
        return False
    cp.nodes[node_id] = NodeState(status="done", output=decision.output())
    run.shared.outputs[node_id] = decision.output()
    await run.emit(NodeEndEvent(task_id=run.task.task_id, node_id=node_id, status="done", duration_ms=0.0,
                                kind="approval", output_preview=decision.decision))
    return decision.decision != "approve"


def seconds_to_deadline(run: RunState) -> float | None:
    """Seconds until the earliest approval deadline, if any approval has one."""
    if not run.cp.waiting:  # the common case, checked before anything else: this runs once per batch
        return None
    now = utcnow()
    limits = [(w.deadline - now).total_seconds() for w in run.cp.waiting.values() if w.deadline is not None]
    return min(limits) if limits else None


async def expire(run: RunState) -> Decision | None:
    """While the graph runs on: the first approval whose deadline passed is decided `timeout`
    (its events emitted) and returned; the caller stops the run `rejected`."""
    now = utcnow()
    expired = [w for w in run.cp.waiting.values() if w.deadline is not None and w.deadline <= now]
    if not expired:
        return None
    decision = timed_out(expired[0].node_id)
    await decide(run, expired[0].node_id, decision)
    return decision
