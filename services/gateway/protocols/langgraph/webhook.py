"""An `/lg` run's completion callback in the LangGraph run-webhook shape, as langgraph-api POSTs it
when a run returns: the run object (`runs.get`'s) with the status the run returned with, its
`run_started_at` and `run_ended_at`, `values` (the thread's state as the run left it) and, for a
failed run, `error` (`{error, message}`, as `runs.wait`'s `__error__`). A run that stopped at an
approval returned there (`success`, as LangGraph's does at an interrupt; its thread is then
`interrupted`). `webhook_sent_at` is stamped at each attempt by the callback worker. The run's
`kwargs` carry its `webhook`, as LangGraph's run object does."""

from __future__ import annotations

from typing import Any

from pydantic_core import to_jsonable_python
from sqlmodel import Session

from services.gateway.chat import lineage
from services.gateway.chat.answers import RunTrace, error_sentence
from services.gateway.chat.tables import ChatRun
from services.gateway.protocols.langgraph import runs, threads
from services.gateway.tables import Task, aware, now
from shared.contract.task import FAULTED


def _error(run: ChatRun, task: Task | None, trace: RunTrace | None) -> dict[str, Any]:
    status = trace.status if trace is not None else (task.status if task is not None else run.state)
    code = trace.code if trace is not None else (task.error_code if task is not None else None)
    error = trace.error if trace is not None else (task.error if task is not None else None)
    return {"error": code or status or run.state, "message": error_sentence(status, code, error)}


def payload(session: Session, run: ChatRun, trace: RunTrace | None, url: str) -> dict[str, Any]:
    body = runs.view(session, run)
    task = session.get(Task, run.id)
    if run.state == "awaiting_approval":
        body["status"] = "success"
    _, parents = lineage.links(session, run.conversation_id)
    branch = lineage.branch_of(parents, run.id)
    values = {"messages": threads.history(session, run.conversation_id, before_seq=run.seq + 1, runs=branch)}
    started = task.started_at if task is not None and task.started_at is not None else run.created_at
    body |= {"kwargs": {"webhook": url}, "run_started_at": aware(started), "run_ended_at": aware(run.ended_at) or now(),
             "webhook_sent_at": None, "values": values}  # fmt: skip
    if body["status"] in ("error", "timeout") or (trace is not None and trace.status in FAULTED):
        body["error"] = _error(run, task, trace)
    return dict(to_jsonable_python(body))
