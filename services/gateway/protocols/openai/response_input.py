"""The body of `POST /v1/responses` as a run's prompt: `input` (a string or items — messages,
`function_call`, `function_call_output`; `reasoning` items a client sends back are the model's
earlier thoughts and are not given to it again), `instructions` first as a system message, the
turns of `previous_response_id` before them, and the client's choices for the model (function
`tools`, `tool_choice`, `text.format`) in the shapes the chat completions use, so the same
answering agent takes them, with the sampling choices (`top_p`, `max_output_tokens`,
`reasoning.effort`, `text.verbosity`, `user`, `safety_identifier`). `background` runs it
regardless of the client (answered at once, `queued`; `routes`); `conversation` makes it the next
turn of one of the caller's conversations (`start`). What Agentix does not honour,
or does not know, is a 400 naming the parameter (`params` says which known ones are no-ops)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from services.gateway.problems import ApiProblem
from services.gateway.protocols.openai import params
from services.gateway.protocols.openai.request import (
    ClientChoices,
    Prompt,
    check_response_format,
    check_tools,
    content_text,
    image_part,
)

# Parameters that change nothing when left at these values; anything else is refused by name.
_NOT_YET: dict[str, tuple[Any, ...]] = {
    "include": (None, []), "prompt": (None,),
    "top_logprobs": (None, 0), "n": (None, 1), "max_tool_calls": (None,),
}
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
_TEXT_PARTS = ("input_text", "output_text", "text")


class ResponseRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=200)
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    stream: bool = False
    background: bool = False  # the run goes on whatever the client does; its response is read by GET
    store: bool | None = None
    metadata: dict[str, str] | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    text: dict[str, Any] | None = None
    previous_response_id: str | None = Field(default=None, max_length=200)
    # An Agentix conversation of the caller's (its id, or `{id}`): the run is its next turn.
    conversation: str | dict[str, Any] | None = None
    # Sampling (checked by `Sampling`, with OpenAI's ranges): `reasoning.effort` is its
    # `reasoning_effort`, `text.verbosity` its `verbosity`.
    top_p: float | None = None
    reasoning: dict[str, Any] | None = None
    user: str | None = None
    safety_identifier: str | None = None
    # Known, and decided in `params` and `check_params`.
    truncation: str | None = None
    service_tier: str | None = None
    prompt_cache_key: str | None = Field(default=None, max_length=1024)
    stream_options: dict[str, Any] | None = None

    @property
    def effort(self) -> Any:
        return (self.reasoning or {}).get("effort")

    @property
    def conversation_id(self) -> str | None:
        """The conversation the response is a turn of (None: a stateless response)."""
        given = self.conversation.get("id") if isinstance(self.conversation, dict) else self.conversation
        if self.conversation is not None and (not isinstance(given, str) or not given.strip()):
            raise _invalid("conversation", "`conversation` is a conversation's id, or `{id}`.")
        return given.strip() if isinstance(given, str) else None


refuse = params.unsupported


def check_params(body: ResponseRequest) -> None:
    """The known parameters besides the prompt and the tools: each honoured, a no-op (`params`)
    or refused by name; an unknown one is refused too."""
    extra = body.model_extra or {}
    for param, fine in _NOT_YET.items():
        if extra.get(param) not in fine:
            raise refuse(param, "the Responses API here does not take it.")
    params.refuse_unknown({k: v for k, v in extra.items() if k not in _NOT_YET})
    if body.conversation_id is not None and body.previous_response_id is not None:
        raise _invalid("conversation", "`previous_response_id` and `conversation` cannot be used together: a "
                                       "conversation holds its own earlier turns.")
    if body.background and body.store is False:
        raise refuse("background", "a background response is read again by GET /v1/responses/{id}: it needs "
                                   "`store` true (or left out).")
    if body.truncation not in (None, "disabled"):
        raise refuse("truncation", "Agentix never drops turns to fit the model's context (`disabled`): an input "
                                   "too long is an error.")
    params.check_service_tier(body.service_tier)
    params.check_metadata(body.metadata)
    unknown = next((k for k in body.reasoning or {} if k not in ("effort", "summary", "generate_summary")), None)
    if unknown is not None:
        params.refuse_unknown({f"reasoning.{unknown}": True})
    # `auto` asks for what the model can give, which is what a response always has: the model's
    # reasoning as it streams it (a `reasoning` item); a summary of a chosen detail is not made.
    params.refuse_set([(f"reasoning.{k}", (body.reasoning or {}).get(k) not in (None, "auto"),
                        "the model's reasoning is passed on as it streams it (a `reasoning` item), not "
                        "summarized on request (`auto` takes it as it comes).")
                       for k in ("summary", "generate_summary")])
    unknown = next((k for k in body.stream_options or {} if k != "include_obfuscation"), None)
    if unknown is not None:
        params.refuse_unknown({f"stream_options.{unknown}": True})


def _invalid(field: str, message: str) -> ApiProblem:
    return ApiProblem(400, "Bad Request", message, errors=[{"code": "invalid_value", "message": message,
                                                             "field": field}])


def _text_of(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for index, part in enumerate(content if isinstance(content, list) else []):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in _TEXT_PARTS:
            raise refuse(f"{where}.content[{index}]", f"`{kind}` content does not reach the model: text only.")
        texts.append(str(part.get("text") or ""))
    return "".join(texts)


def _user_content(content: Any, where: str) -> str | list[dict[str, Any]]:
    """A user message's content: its text, or — with `input_image` parts — the model's content
    parts (text and images)."""
    parts = content if isinstance(content, list) else []
    if not any(isinstance(p, dict) and p.get("type") == "input_image" for p in parts):
        return _text_of(content, where)
    out: list[dict[str, Any]] = []
    for index, part in enumerate(parts):
        at = f"{where}.content[{index}]"
        if part.get("type") == "input_image":
            if part.get("file_id") is not None:
                raise refuse(f"{at}.file_id", "Agentix keeps no uploaded files: send the image as `image_url` "
                                              "(an http(s) or data URL).")
            out.append(image_part(part.get("image_url"), part.get("detail"), at))
        elif part.get("type") in _TEXT_PARTS:
            out.append({"type": "text", "text": str(part.get("text") or "")})
        else:
            raise refuse(at, f"`{part.get('type')}` content does not reach the model: text and images only.")
    return out


def image_params(items: list[dict[str, Any]]) -> list[str]:
    """Where the input's images are (`input[i].content[j]`)."""
    found: list[str] = []
    for i, item in enumerate(items):
        content = item.get("content")
        for j, part in enumerate(content if isinstance(content, list) else []):
            if isinstance(part, dict) and part.get("type") == "input_image":
                found.append(f"input[{i}].content[{j}]")
    return found


def function_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Responses API's function tools (`{type, name, description, parameters, strict}`) as
    the chat completions' (`{type, function: {…}}`)."""
    specs: list[dict[str, Any]] = []
    for index, tool in enumerate(tools):
        if tool.get("type") != "function":
            raise refuse(f"tools[{index}].type", f"`{tool.get('type')}` tools are not supported: function tools only.")
        function = {k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None}
        specs.append({"type": "function", "function": function})
    check_tools(specs, "tools")
    return specs


def tool_choice_of(value: str | dict[str, Any] | None, has_tools: bool) -> str | dict[str, Any] | None:
    if value is None or value in ("auto", "none"):
        return value
    if not has_tools:
        raise refuse("tool_choice", "there are no `tools` to choose from.")
    if value == "required":
        return value
    if isinstance(value, dict) and value.get("type") == "function" and isinstance(value.get("name"), str):
        return {"type": "function", "function": {"name": value["name"]}}
    raise refuse("tool_choice", "only `auto`, `none`, `required` or a function by name.")


def response_format_of(text: dict[str, Any] | None) -> dict[str, Any] | None:
    """`text.format` as the chat completions' `response_format` (None for plain text)."""
    extra = [k for k, v in (text or {}).items() if k not in ("format", "verbosity") and v is not None]
    if extra:
        params.refuse_unknown({f"text.{extra[0]}": True})
    form = (text or {}).get("format") or {"type": "text"}
    kind = form.get("type")
    if kind == "text":
        return None
    if kind == "json_schema":
        spec = {k: form[k] for k in ("name", "description", "schema", "strict") if form.get(k) is not None}
        out: dict[str, Any] = {"type": "json_schema", "json_schema": spec}
    else:
        out = {"type": kind}
    check_response_format(out, "text.format")
    return out


def _turns(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        where = f"input[{index}]"
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            turns.append({"role": "user", "content": _user_content(item.get("content"), where)})
        elif kind == "message" and item.get("role") in _ROLES:
            turns.append({"role": _ROLES[item["role"]], "content": _text_of(item.get("content"), where)})
        elif kind == "function_call":
            call_id, name = item.get("call_id"), item.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                raise _invalid(where, f"`{where}` is a function_call without its `call_id` and `name`.")
            call = {"id": call_id, "type": "function",
                    "function": {"name": name, "arguments": str(item.get("arguments") or "")}}
            # One assistant turn holds the calls it made together (and the text it said first).
            if turns and turns[-1]["role"] == "assistant" and "tool_calls" in turns[-1]:
                turns[-1]["tool_calls"].append(call)
            elif turns and turns[-1]["role"] == "assistant":
                turns[-1] = {**turns[-1], "tool_calls": [call]}
            else:
                turns.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise _invalid(f"{where}.call_id", f"`{where}` is a function_call_output without its `call_id`.")
            output = item.get("output")
            turns.append({"role": "tool", "tool_call_id": call_id,
                          "content": output if isinstance(output, str) else _text_of(output, where)})
        elif kind != "reasoning":
            raise refuse(f"{where}.type", f"`{kind}` items are not supported: messages, function_call, "
                                          "function_call_output.")
    return turns


def _one_turn_of_a_conversation(body: ResponseRequest, turns: list[dict[str, Any]]) -> None:
    """A conversation's run reads its own window and is given the user's new words only: what
    else the request carries would not reach the model, so it is refused by name."""
    why = "a conversation's run is given the user's new message only (the conversation holds the rest)."
    if body.instructions:
        raise refuse("instructions", why)
    if body.store is False:
        raise refuse("store", "a conversation keeps its turns (delete the conversation to remove them).")
    if len(turns) > 1:
        raise refuse("input", f"{why} Send one user message.")


def prompt_of(body: ResponseRequest, earlier: list[dict[str, Any]] | None = None) -> Prompt:
    """The run's input: the last user message (or none after tool outputs), the turns before it
    (`previous_response_id`'s first, then `instructions`, then the items)."""
    check_params(body)
    items = [{"role": "user", "content": body.input}] if isinstance(body.input, str) else body.input
    turns = _turns(items)
    last = turns[-1] if turns else None
    if last is None or not (last["role"] == "tool" or (last["role"] == "user" and (
            isinstance(last["content"], list) or last["content"].strip()))):
        raise ApiProblem(400, "Bad Request", "The last input item must be the user's message, with text, or a "
                                             "function_call_output.",
                         errors=[{"code": "invalid_value", "message": "last item", "field": "input"}])
    tools = function_tools(body.tools or [])
    client = ClientChoices(tools=tools, tool_choice=tool_choice_of(body.tool_choice, bool(tools)),
                           parallel_tool_calls=body.parallel_tool_calls, response_format=response_format_of(body.text),
                           temperature=body.temperature, max_tokens=body.max_output_tokens,
                           sampling=params.sampling_of(
                               {"top_p": body.top_p, "reasoning_effort": body.effort, "user": body.user,
                                "verbosity": (body.text or {}).get("verbosity"),
                                "safety_identifier": body.safety_identifier},
                               {"reasoning_effort": "reasoning.effort", "verbosity": "text.verbosity"}))
    if body.conversation_id is not None:
        _one_turn_of_a_conversation(body, turns)
    instructions = [{"role": "system", "content": body.instructions}] if body.instructions else []
    images = image_params(items)
    at = len(earlier or []) if instructions else None  # the instructions are this response's own
    if last["role"] == "tool":
        return Prompt(text="", history=[*(earlier or []), *instructions, *turns], client=client, image_parts=images,
                      instructions_at=at)
    parts = last["content"] if isinstance(last["content"], list) else None
    return Prompt(text=content_text(last["content"]), history=[*(earlier or []), *instructions, *turns[:-1]],
                  client=client, parts=parts, image_parts=images, instructions_at=at)
