"""Spans of a run, named by kind (ids are attributes, never part of a name): one per node and one
per model call. Free when tracing is off (`shared.telemetry.span` is a no-op then)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from services.dispatcher.engine.compile import PlanNode
from services.dispatcher.llm.api import LLM, DeltaSink, LLMRequest, LLMResult, TokenBudget
from shared.telemetry import NO_SPAN, span, tracing_enabled


def node_span(task_id: str, node: PlanNode) -> AbstractContextManager[Span]:
    if not tracing_enabled():  # before building the name and attributes: this runs for every node
        return NO_SPAN
    return span(f"node {node.kind}", {"agentix.task_id": task_id, "agentix.node_id": node.id,
                                      "agentix.node_kind": node.kind})


def mark_failed(current: Span, code: str | None) -> None:
    current.set_status(Status(StatusCode.ERROR, code or "failed"))


def llm_span(name: str, task_id: str, node_id: str, model: str | None) -> AbstractContextManager[Span]:
    attributes = {"agentix.task_id": task_id, "agentix.node_id": node_id, "gen_ai.operation.name": "chat"}
    if model:
        attributes["gen_ai.request.model"] = model
    return span(name, attributes, SpanKind.CLIENT)


def record_result(current: Span, result: LLMResult) -> None:
    if not current.is_recording():
        return
    current.set_attribute("gen_ai.response.model", result.model)
    current.set_attribute("gen_ai.usage.input_tokens", result.usage.prompt_tokens)
    current.set_attribute("gen_ai.usage.output_tokens", result.usage.completion_tokens)
    if result.cached:
        current.set_attribute("agentix.llm.cached", True)


class TracedLLM:
    """The LLM handed to the agent runner, so each of its model calls gets its own span."""

    def __init__(self, llm: LLM, task_id: str, node_id: str) -> None:
        self._llm = llm
        self._task_id = task_id
        self._node_id = node_id

    @property
    def chain_revision(self) -> int:
        return self._llm.chain_revision

    async def complete(self, request: LLMRequest, *, budget: TokenBudget | None = None,
                       on_delta: DeltaSink | None = None) -> LLMResult:
        with llm_span("llm.complete", self._task_id, self._node_id, request.model) as current:
            result = await self._llm.complete(request, budget=budget, on_delta=on_delta)
            record_result(current, result)
            return result

    def __getattr__(self, name: str) -> Any:  # anything else the runner may use (e.g. `config`)
        return getattr(self._llm, name)


def traced(llm: LLM, task_id: str, node_id: str) -> LLM:
    return TracedLLM(llm, task_id, node_id) if tracing_enabled() else llm
