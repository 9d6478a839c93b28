"""Aggregates over task records: counts by state (metrics) and the admin overview."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from services.gateway.tables import Task, TaskNode, aware, now
from shared.contract.task import TERMINAL

WINDOW = timedelta(hours=24)


def task_counts(session: Session) -> dict[str, int]:
    rows = session.exec(select(Task.status, func.count()).group_by(Task.status))
    return {status: int(count) for status, count in rows}


def _percentile(values: list[float], pct: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return round(ordered[index], 3)


def overview(session: Session) -> dict[str, Any]:
    since = now() - WINDOW
    tasks = list(session.exec(select(Task).where(col(Task.created_at) >= since)))
    by_state = Counter(t.status for t in tasks)
    durations = [
        (aware(t.finished_at) - aware(t.started_at)).total_seconds()  # type: ignore[operator]
        for t in tasks
        if t.finished_at is not None and t.started_at is not None
    ]
    prompt = sum(int((t.usage or {}).get("prompt_tokens", 0)) for t in tasks)
    completion = sum(int((t.usage or {}).get("completion_tokens", 0)) for t in tasks)
    cost = sum(float((t.usage or {}).get("cost", 0.0)) for t in tasks)
    finished = [t for t in tasks if t.status in TERMINAL]
    failed = [t for t in finished if t.status != "done"]
    failing = session.exec(
        select(TaskNode.node_id, TaskNode.kind, func.count())
        .join(Task, col(Task.id) == col(TaskNode.task_id))
        .where(TaskNode.status == "failed", col(Task.created_at) >= since)
        .group_by(col(TaskNode.node_id), col(TaskNode.kind))
        .order_by(func.count().desc())
        .limit(10)
    )
    return {
        "window_hours": 24,
        "tasks": {"total": len(tasks), "by_state": dict(by_state), "per_hour": round(len(tasks) / 24, 3)},
        "failure_rate": round(len(failed) / len(finished), 4) if finished else 0.0,
        "tokens": {"prompt": prompt, "completion": completion, "total": prompt + completion},
        "cost": round(cost, 6),
        "duration_s": {"p50": _percentile(durations, 50), "p95": _percentile(durations, 95), "count": len(durations)},
        "top_failing_nodes": [{"node_id": n, "kind": k, "failures": int(c)} for n, k, c in failing],
    }
