"""`agent`: system + prompt, then one model call — or the ReAct loop of the agent runner when the
node has tools. With `evaluate`, the answer is evaluated (rules + judge + faithfulness to the
retrieved chunks) and regenerated once if poor. A map body with an agent config runs the same."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from services.dispatcher.engine.context import NodeContext, NodeError, NodeLLM
from services.dispatcher.engine.spans import traced
from services.dispatcher.harness.evaluate import EvalOutcome, Evaluator
from services.dispatcher.llm.api import LLMRequest, LLMResult, ToolCallRequest
from shared.contract.dsl import AgentConfig
from shared.contract.events import ToolCallEvent

DEFAULT_EVALUATOR = Evaluator()


async def run(ctx: NodeContext) -> Any:
    return await run_agent_body(ctx, ctx.node.config, "config", evaluate=ctx.node.config.evaluate, resumable=True)


async def run_agent_body(ctx: NodeContext, config: AgentConfig, prefix: str,
                         extra: Mapping[str, Any] | None = None, *, stream: bool = True,
                         evaluate: bool = False, resumable: bool = False) -> Any:
    """An agent node (or a map body): system + prompt, then the model or the ReAct runner;
    with `evaluate`, the answer is evaluated (and regenerated once if poor). `resumable`: the
    node's own loop (not a map item's) keeps its progress and may park for a tool approval."""
    messages: list[dict[str, Any]] = []
    if config.system is not None:
        messages.append({"role": "system", "content": ctx.render(f"{prefix}.system", extra)})
    if config.history is not None:
        messages.extend(history_messages(ctx.node.id, ctx.evaluate(f"{prefix}.history", extra)))
    prompt = ctx.render(f"{prefix}.prompt", extra)
    # A caller whose conversation ends with tool results (an OpenAI client's `role: tool`
    # messages) has no new words: the model reads on from the results. Nor one whose last
    # message, with images, ends the history (its content parts).
    last = messages[-1] if messages else {}
    ends_with_parts = last.get("role") == "user" and isinstance(last.get("content"), list)
    if prompt or not messages or (last["role"] != "tool" and not ends_with_parts):
        messages.append({"role": "user", "content": prompt})
    request = LLMRequest(messages=messages, model=config.model or None, temperature=config.temperature,
                         max_tokens=config.max_tokens, json_output=config.output == "json", stream=stream,
                         tool_choice=config.tool_choice, parallel_tool_calls=config.parallel_tool_calls,
                         response_format=config.response_format, sampling=config.sampling)
    tools = await ctx.tools_for(config.tools)
    if tools:
        defaults = tool_defaults(ctx.render_tree(config.tool_defaults, f"{prefix}.tool_defaults", extra))
        result = await ctx.run_agent(request, tools, config.max_steps, resumable=resumable, defaults=defaults,
                                     client_tools=config.client_tools)
    else:
        if config.client_tools:
            request.tools = list(config.client_tools)
        result = await ctx.complete(request, stream=stream)
    client_calls = [c for c in result.tool_calls if c.name in config.client_tool_names()]
    if client_calls:
        await tell_client_calls(ctx, client_calls)
        return result.text
    if evaluate:
        result = await evaluate_answer(ctx, request, result, stream=stream)
    check_response_format(ctx.node.id, config.response_format, result.text)
    if config.output == "json":
        return parse_json_output(ctx.node.id, result.text)
    return result.text


async def tell_client_calls(ctx: NodeContext, calls: list[ToolCallRequest]) -> None:
    """The caller's tools the model called: events for the caller to run them (never run here)."""
    for call in calls:
        await ctx.emit(ToolCallEvent(task_id=ctx.task.task_id, node_id=ctx.node.id, call_id=call.id,
                                     tool=call.name, args=call.arguments, client=True))


def check_response_format(node_id: str, response_format: dict[str, Any] | None, text: str) -> None:
    """A `json_object` answer must be a JSON object, a `json_schema` one must conform to the
    schema: anything else fails the node (`bad_output`), never passed on as if it were valid."""
    kind = (response_format or {}).get("type")
    if kind not in ("json_object", "json_schema"):
        return
    value = parse_json_output(node_id, text)
    if kind == "json_object":
        if not isinstance(value, dict):
            raise NodeError("bad_output", f"node {node_id!r}: the model's answer is not a JSON object")
        return
    spec = (response_format or {}).get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        return
    from jsonschema.validators import validator_for

    validator = validator_for(schema)(schema)
    error = next(iter(sorted(validator.iter_errors(value), key=lambda e: list(e.path))), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise NodeError("bad_output", f"node {node_id!r}: the model's answer does not match the response "
                                      f"format's JSON schema at {where}: {error.message}")


HISTORY_ROLES = frozenset({"user", "assistant", "system", "tool"})


def tool_defaults(rendered: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The rendered `tool_defaults` without the values that came out empty (a template over an
    input field that was not given): those arguments stay the model's to choose."""
    kept = {tool: {arg: value for arg, value in args.items() if value not in (None, "")}
            for tool, args in rendered.items()}
    return {tool: args for tool, args in kept.items() if args}


def history_messages(node_id: str, value: Any) -> list[dict[str, Any]]:
    """The `history` field's value as model messages: a list (or its JSON text) of
    `{role, content}` with role user, assistant or system — a user's content may be `text` and
    `image_url` parts, an assistant's may carry the
    `tool_calls` it made (content null then), and a `tool` message answers one by its
    `tool_call_id`; anything else fails the node."""
    if isinstance(value, str):
        if not value.strip():
            return []
        try:
            value = json.loads(value)
        except ValueError:
            value = None
    if value is None:
        value = []
    if not isinstance(value, list):
        raise NodeError("template", f"node {node_id!r}: `history` must give a list of {{role, content}} messages")
    out: list[dict[str, Any]] = []
    for index, item in enumerate(value):
        message = _history_message(item)
        if message is None:
            raise NodeError("template", f"node {node_id!r}: `history[{index}]` is not a {{role, content}} message "
                                        f"with role user, assistant or system (or an assistant's `tool_calls`, "
                                        f"or a `tool` result with its `tool_call_id`)")
        out.append(message)
    return out


def _history_message(item: Any) -> dict[str, Any] | None:
    role = item.get("role") if isinstance(item, Mapping) else None
    content = item.get("content") if isinstance(item, Mapping) else None
    if role == "user" and isinstance(content, list):  # a user's text and images, as content parts
        return {"role": role, "content": [dict(p) for p in content]} if all(map(_content_part, content)) else None
    if role not in HISTORY_ROLES or not (isinstance(content, str) or content is None):
        return None
    calls = item.get("tool_calls")
    if role == "assistant" and isinstance(calls, list) and calls:
        if not all(isinstance(c, Mapping) and isinstance(c.get("id"), str) and isinstance(c.get("function"), Mapping)
                   for c in calls):
            return None
        return {"role": role, "content": content, "tool_calls": [dict(c) for c in calls]}
    if role == "tool":
        call_id = item.get("tool_call_id")
        return {"role": role, "content": content or "", "tool_call_id": call_id} if isinstance(call_id, str) else None
    return {"role": role, "content": content} if content is not None else None


def _content_part(part: Any) -> bool:
    """A `text` part, or an `image_url` part with its `url` (the model's content parts)."""
    if not isinstance(part, Mapping):
        return False
    if part.get("type") == "text":
        return isinstance(part.get("text"), str)
    image = part.get("image_url")
    return part.get("type") == "image_url" and isinstance(image, Mapping) and isinstance(image.get("url"), str)


def parse_json_output(node_id: str, text: str) -> Any:
    """An agent's `output: json`: the text (code fences allowed) must parse as JSON."""
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    try:
        return json.loads(body)
    except ValueError as exc:
        raise NodeError("bad_output", f"node {node_id!r}: the model's answer is not valid JSON ({exc})") from exc


async def evaluate_answer(ctx: NodeContext, request: LLMRequest, result: LLMResult, *, stream: bool) -> LLMResult:
    """`evaluate`: rules + judge + faithfulness to the retrieved chunks → `eval` event; a poor
    answer is regenerated once with the critique (an `eval` event with grade poor comes
    first, then the new answer's tokens, then the final `eval` with `regenerated`)."""
    task_id, node_id = ctx.task.task_id, ctx.node.id
    evaluator = ctx.shared.deps.evaluator or DEFAULT_EVALUATOR
    llm = NodeLLM(traced(ctx.shared.deps.llm, task_id, node_id), ctx, count=True)

    async def on_poor(first: EvalOutcome) -> None:
        await ctx.emit(first.event(task_id, node_id))

    events = ctx.stream_events(request.model) if stream else None
    try:
        final, outcome = await evaluator.run(
            llm, request, result, chunks=retrieved_chunks(ctx), budget=ctx.shared.budget,
            on_delta=events.delta if events is not None else None, on_poor=on_poor)
    finally:
        if events is not None:
            await events.end()
    ctx.evaluation = outcome
    await ctx.emit(outcome.event(task_id, node_id))
    return final


def retrieved_chunks(ctx: NodeContext) -> list[str]:
    """The chunk texts of the retrievers this node's templates read (its RAG context)."""
    texts: list[str] = []
    for ref in sorted(ctx.node.refs & ctx.shared.plan.retriever_ids):
        value = ctx.shared.outputs.get(ref)
        chunks = value.get("chunks") if isinstance(value, dict) else None
        for chunk in chunks if isinstance(chunks, list) else []:
            text = chunk.get("text") if isinstance(chunk, dict) else None
            if isinstance(text, str) and text.strip():
                texts.append(text)
    return texts

