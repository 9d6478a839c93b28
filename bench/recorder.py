"""The recorder's cost per transaction: the same task events (three-agent runs, 13 status and
exec events each, interleaved as runs in flight together produce them) applied to the task
records (`runs.records.apply_events`, the recorder's write) in small transactions, as a
hosted model's pace makes them (the recorder commits every 50 ms what has come), and in large
ones, as the instant model's bursts do. Prints the CPU per run and per transaction of each and
their ratio: what a transaction costs beyond its events. A database of its own (SQLite in a
temporary directory, or `--db-url`), migrated first. Run:
    python -m bench.recorder [--runs 400] [--small 12] [--large 200] [--rounds 3] [--db-url URL]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from services.gateway.db import Database
from services.gateway.migrate import upgrade_engine
from services.gateway.runs.records import apply_events
from services.gateway.tables import Task
from shared.contract.events import DoneEvent, NodeEndEvent, NodeStartEvent, StatusEvent

NODES = (("in", "input"), ("a1", "agent"), ("a2", "agent"), ("a3", "agent"), ("out", "output"))
DSL = {"version": "1", "nodes": [{"id": n, "kind": k} for n, k in NODES], "edges": []}
IN_FLIGHT = 50


def run_events(task_id: str) -> list[Any]:
    events: list[Any] = [StatusEvent(task_id=task_id, n=1, status="running")]
    for node, kind in NODES:
        events.append(NodeStartEvent(task_id=task_id, n=len(events) + 1, node_id=node, kind=kind))
        events.append(NodeEndEvent(task_id=task_id, n=len(events) + 1, node_id=node, status="done",
                                   duration_ms=1.0, output_preview="an answer of a few words"))
    events.append(StatusEvent(task_id=task_id, n=len(events) + 1, status="done"))
    events.append(DoneEvent(task_id=task_id, n=len(events) + 1, status="done", output={"out": "an answer"}))
    return events


def stream_of(db: Database, runs: int) -> list[Any]:
    """New task rows, and their runs' events in stream order: IN_FLIGHT runs at a time, step by step."""
    ids = [f"t_{uuid.uuid4().hex[:20]}" for _ in range(runs)]
    with db.session() as session:
        for task_id in ids:
            session.add(Task(id=task_id, user_id="bench", status="submitted", dsl=DSL))
        session.commit()
    per_run = [run_events(task_id) for task_id in ids]
    out = []
    for start in range(0, runs, IN_FLIGHT):
        group = per_run[start:start + IN_FLIGHT]
        for step in range(max(len(events) for events in group)):
            out += [events[step] for events in group if step < len(events)]
    return out


def applied(db: Database, runs: int, per_tx: int) -> tuple[float, float]:
    """CPU ms per run and per transaction, applying `runs` runs' events `per_tx` at a time."""
    events = stream_of(db, runs)
    started, transactions = time.process_time(), 0
    for at in range(0, len(events), per_tx):
        with db.session() as session:
            apply_events(session, events[at:at + per_tx])
            session.commit()
        transactions += 1
    cpu_ms = (time.process_time() - started) * 1000
    return cpu_ms / runs, cpu_ms / transactions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--small", type=int, default=12, help="events per transaction at a hosted pace")
    parser.add_argument("--large", type=int, default=200, help="events per transaction with bursts")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db-url", default=None)
    args = parser.parse_args()
    url = args.db_url or f"sqlite:///{Path(tempfile.mkdtemp(prefix='bench-recorder-')) / 'gateway.db'}"
    db = Database(url)
    upgrade_engine(db.engine)
    try:
        small, large = [], []
        for _ in range(args.rounds):  # taking turns: a machine that drifts weighs on both
            small.append(applied(db, args.runs, args.small))
            large.append(applied(db, args.runs, args.large))
        for name, per_tx, got in (("small", args.small, small), ("large", args.large, large)):
            run_ms = statistics.median(g[0] for g in got)
            tx_ms = statistics.median(g[1] for g in got)
            print(f"{name}: {per_tx} events per transaction: {run_ms:.2f} ms per run, {tx_ms:.2f} ms per transaction")
        ratio = statistics.median(g[0] for g in small) / statistics.median(g[0] for g in large)
        print(f"RATIO CPU per run, {args.small} / {args.large} events per transaction = {ratio:.2f}x")
    finally:
        db.close()


if __name__ == "__main__":
    main()
