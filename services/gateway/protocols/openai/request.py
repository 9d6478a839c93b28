"""The body of `POST /v1/chat/completions`, as much of it as Agentix uses, and what it means for
a run: the user's last message is the run's text, the messages before it are the history the
client holds (a stateless request's memory window, `tool` messages left out).

The client's function `tools`, `tool_choice`, `response_format` and its sampling choices
(`temperature`, `max_tokens`, `top_p`, `stop`, `seed`, …: `ClientChoices`) reach the model; the
history may carry the assistant's `tool_calls` and the `role: tool` results, and may end with
them; the legacy function calling's turns (an assistant's `function_call`, a `role: function`
result) are taken as those tool turns (`_function_turns`). What Agentix does not honour is a 400
naming the parameter: `n` > 1, `logprobs`, `top_logprobs`, audio output, the legacy `functions`/
`function_call` parameters (the model's call would come back as `tool_calls`, which a client
asking with `functions` does not read: it expects `message.function_call`), tools other than
functions, content parts other than text and a user's images (`image_url`: they reach a model
that takes images, `vision`; audio, files), and any parameter it does not know (`params`, which
also says which known ones are accepted as no-ops and why).

The tier-1 guardrail reads what the user wrote (`Prompt.strings`): the user's messages, never the
client's own system/developer instructions, the assistant's turns or tool results."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from services.gateway.chat.queue import MAX_TEXT
from services.gateway.problems import ApiProblem
from services.gateway.protocols.openai import params
from shared.contract.sampling import Sampling

# The roles that are part of a conversation's history (`developer` is OpenAI's newer `system`).
_HISTORY_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None
    image_url: str | dict[str, Any] | None = None  # an `image_url` part's `{url, detail?}`


_DETAILS = (None, "auto", "low", "high")


def image_part(url: Any, detail: Any, where: str) -> dict[str, Any]:
    """An image as the chat completions' content part the model is given (`{url, detail?}`: an
    https or data URL)."""
    if not isinstance(url, str) or not url.startswith(("https://", "http://", "data:image/")):
        raise params.invalid(where, "an image is an http(s) URL or a `data:image/…` URL")
    if detail not in _DETAILS:
        raise params.invalid(where, "`detail` is auto, low or high")
    return {"type": "image_url", "image_url": {"url": url, **({"detail": detail} if detail else {})}}


class FunctionCall(BaseModel):
    name: str = Field(min_length=1, max_length=128)
    arguments: str = ""


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1, max_length=200)
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str = Field(max_length=32)
    content: str | list[ContentPart] | None = None
    tool_calls: list[ToolCall] | None = None  # an assistant's
    tool_call_id: str | None = Field(default=None, max_length=200)  # a `tool` message's
    function_call: FunctionCall | None = None  # an assistant's, in the legacy function calling
    name: str | None = Field(default=None, max_length=128)  # a legacy `function` message's function

    @property
    def text(self) -> str:
        """The message's text: a string, or its text parts joined (images and audio are not read)."""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text or "" for p in self.content or [] if p.type == "text")

    def parts(self, index: int) -> list[dict[str, Any]] | None:
        """The content as the model's parts when it carries images (None: text only)."""
        if not isinstance(self.content, list) or all(p.type == "text" for p in self.content):
            return None
        out: list[dict[str, Any]] = []
        for number, part in enumerate(self.content):
            if part.type == "text":
                out.append({"type": "text", "text": part.text or ""})
                continue
            given = part.image_url if isinstance(part.image_url, dict) else {"url": part.image_url}
            out.append(image_part(given.get("url"), given.get("detail"), f"messages[{index}].content[{number}]"))
        return out

    def image_params(self, index: int) -> list[str]:
        parts = self.content if isinstance(self.content, list) else []
        return [f"messages[{index}].content[{number}]" for number, p in enumerate(parts) if p.type == "image_url"]


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    include_usage: bool = False
    include_obfuscation: bool | None = None  # a no-op (`params`): Agentix never pads its chunks


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=200)
    messages: list[Message] = Field(min_length=1, max_length=1000)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    audio: dict[str, object] | None = None
    modalities: list[str] | None = None
    tools: list[dict[str, object]] | None = None
    functions: list[dict[str, object]] | None = None
    tool_choice: str | dict[str, object] | None = None
    parallel_tool_calls: bool | None = None
    function_call: str | dict[str, object] | None = None
    response_format: dict[str, object] | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    # Sampling (checked by `Sampling`, with OpenAI's ranges).
    top_p: float | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, int] | None = None
    reasoning_effort: str | None = None
    verbosity: str | None = None
    user: str | None = None
    safety_identifier: str | None = None
    # Known, and decided one by one in `params`.
    metadata: dict[str, Any] | None = None
    store: bool | None = None
    service_tier: str | None = None
    prompt_cache_key: str | None = Field(default=None, max_length=1024)
    prediction: dict[str, Any] | None = None
    web_search_options: dict[str, Any] | None = None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class ClientChoices(BaseModel):
    """What the client chose for the model: its function tools (never run by Agentix: a call of
    one ends the answer with `tool_calls`), `tool_choice`, and `response_format`."""

    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    # Sampling the answering agent takes (an agent node's own `temperature`, `max_tokens`).
    temperature: float | None = None
    max_tokens: int | None = None
    sampling: Sampling | None = None  # the rest (`top_p`, `stop`, `seed`, …)

    def agent_config(self) -> dict[str, Any]:
        """The answering agent's config fields (see docs/DSL.md, `client_tools`)."""
        config: dict[str, Any] = {}
        if self.tools:
            config["client_tools"] = self.tools
            if self.tool_choice is not None:
                config["tool_choice"] = self.tool_choice
            if self.parallel_tool_calls is not None:
                config["parallel_tool_calls"] = self.parallel_tool_calls
        if self.response_format is not None:
            config["response_format"] = self.response_format
        if self.temperature is not None:
            config["temperature"] = self.temperature
        if self.max_tokens is not None:
            config["max_tokens"] = self.max_tokens
        if self.sampling is not None:
            config["sampling"] = self.sampling.body()
        return config


class Prompt(BaseModel):
    """The run's input: the last user message (empty when the client's last messages are tool
    results), and the turns the client sent before it."""

    text: str
    history: list[dict[str, Any]]
    client: ClientChoices = Field(default_factory=ClientChoices)
    parts: list[dict[str, Any]] | None = None  # the last user message's parts, when it carries images
    image_parts: list[str] = Field(default_factory=list)  # where the request's images are (`param`s)
    instructions_at: int | None = None  # where in `history` the Responses API's `instructions` are

    @property
    def carries_tool_turns(self) -> bool:
        return any(m["role"] == "tool" or m.get("tool_calls") for m in self.history)

    def strings(self) -> list[str]:
        """What the tier-1 guardrail reads: what the user wrote (the last message and the user's
        earlier turns). System/developer messages are the client's own instructions (an agent
        framework's retry prompt may well warn the model about `<system>` tags), assistant
        turns are the model's and tool results the client's tools': none is the user's input."""
        return [t for t in [self.text, *(content_text(m["content"]) for m in self.history if m["role"] == "user")]
                if t]

    def turns(self) -> tuple[str, list[dict[str, Any]]]:
        """The run's `text` and `history`: with images, the user's last message (its parts) ends
        the history and there are no words besides it."""
        if self.parts is None:
            return self.text, self.history
        return "", [*self.history, {"role": "user", "content": self.parts}]


def content_text(content: Any) -> str:
    """A turn's text: its string, or its text parts joined."""
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content or "")


_unsupported = params.unsupported


def refuse_unsupported(body: ChatCompletionRequest) -> None:
    """A 400 naming the first parameter Agentix does not know or cannot honour (never silently
    ignored)."""
    params.refuse_unknown(body.model_extra)
    params.refuse_set([
        ("store", body.store, "Agentix keeps no stored chat completions to list or retrieve (each run's record "
                              "is at /api/v1/tasks/{id}); leave it out or send false."),
        ("web_search_options", body.web_search_options, "the assistants have no built-in web search."),
    ])
    params.check_service_tier(body.service_tier)
    params.check_metadata(body.metadata)
    if body.prediction is not None and body.prediction.get("type") != "content":
        raise params.invalid("prediction.type", "a prediction is `{type: content, content}`")
    if body.n is not None and body.n != 1:
        raise _unsupported("n", "an assistant run gives one answer; send n=1 or leave it out.")
    if body.logprobs:
        raise _unsupported("logprobs", "an assistant's answer comes from a run, not one sampled sequence.")
    if body.top_logprobs:
        raise _unsupported("top_logprobs", "an assistant's answer comes from a run, not one sampled sequence.")
    if body.audio is not None or any(m != "text" for m in body.modalities or []):
        raise _unsupported("audio" if body.audio is not None else "modalities",
                           "Agentix answers in text only.")
    # A model's call of one would come back as `tool_calls`, which a client asking with the legacy
    # `functions` does not read (it expects `message.function_call`): refused, not half-served.
    if body.functions:
        raise _unsupported("functions", "the legacy `functions` are not taken (a call would be answered as "
                                        "`tool_calls`): send them as `tools`.")
    if body.function_call is not None:
        raise _unsupported("function_call", "the legacy `function_call` is not taken: use `tools` and "
                                            "`tool_choice`.")
    check_tools(body.tools or [], "tools")
    if not body.tools and body.tool_choice not in (None, "none", "auto"):
        raise _unsupported("tool_choice", "there are no `tools` to choose from.")
    check_response_format(body.response_format, "response_format")
    for index, message in enumerate(body.messages):
        parts = message.content if isinstance(message.content, list) else []
        taken = ("text", "image_url") if message.role == "user" else ("text",)
        other = next((p.type for p in parts if p.type not in taken), None)
        if other is not None:
            raise _unsupported(f"messages[{index}].content", f"`{other}` content parts do not reach the model: the "
                                                             "assistants take text, and a user's images (`image_url`).")


def check_tools(tools: list[dict[str, Any]], where: str) -> None:
    """Function tools only, each named once (what the model can be offered)."""
    names: set[str] = set()
    for index, tool in enumerate(tools):
        function = tool.get("function")
        if tool.get("type") != "function":
            raise _unsupported(f"{where}[{index}].type", f"`{tool.get('type')}` tools are not supported: "
                                                         "function tools only.")
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name or name in names:
            raise ApiProblem(400, "Bad Request", f"`{where}[{index}].function.name` must be a name given once.",
                             errors=[{"code": "invalid_value", "message": "function name",
                                      "field": f"{where}[{index}].function.name"}])
        names.add(name)


def check_response_format(response_format: dict[str, Any] | None, where: str) -> None:
    kind = (response_format or {}).get("type", "text")
    if kind not in ("text", "json_object", "json_schema"):
        raise _unsupported(f"{where}.type", f"`{kind}` is not a response format Agentix knows: text, "
                                            "json_object or json_schema.")
    if kind == "json_schema":
        spec = (response_format or {}).get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("schema", {}), dict):
            raise ApiProblem(400, "Bad Request", f"`{where}.json_schema` must be an object with a `schema`.",
                             errors=[{"code": "invalid_value", "message": "json_schema",
                                      "field": f"{where}.json_schema"}])


_RESULT_ROLES = ("tool", "function")  # a tool's result, or a legacy function's


def legacy_call_id(index: int) -> str:
    """The id given to the legacy `function_call` of `messages[index]`: made from its place, so
    the same history sent again gives the model the same ids."""
    return f"call_fn{index}"


def _function_turns(messages: list[Message]) -> list[dict[str, Any] | None]:
    """Each message as a history turn (None: none), the legacy function calling's as tool turns:
    an assistant's `function_call` is one tool call, and the `function` message after it, of
    that function's name, is its result. A result without its call is a 400."""
    turns: list[dict[str, Any] | None] = []
    waiting: dict[str, str] = {}  # function name → the id of its call not yet answered
    for index, message in enumerate(messages):
        if message.role == "assistant" and message.function_call is not None:
            call_id = legacy_call_id(index)
            waiting[message.function_call.name] = call_id
            calls = [c.model_dump(include={"id", "type", "function"}) for c in message.tool_calls or []]
            calls.append({"id": call_id, "type": "function", "function": message.function_call.model_dump()})
            turns.append({"role": "assistant", "content": message.text or None, "tool_calls": calls})
        elif message.role == "function":
            answered = waiting.pop(message.name or "", None)
            if answered is None:
                why = (f"`messages[{index}]` is a function result without an assistant `function_call` of "
                       f"`{message.name}` before it.")
                raise ApiProblem(400, "Bad Request", why, errors=[{"code": "invalid_value", "message": why,
                                                                   "field": f"messages[{index}].name"}])
            turns.append({"role": "tool", "content": message.text, "tool_call_id": answered})
        elif message.role == "user" and (parts := message.parts(index)) is not None:
            turns.append({"role": "user", "content": parts})
        else:
            turns.append(_history_turn(message))
    return turns


def _history_turn(message: Message) -> dict[str, Any] | None:
    if message.role == "tool":
        return {"role": "tool", "content": message.text, "tool_call_id": message.tool_call_id or ""}
    if message.role == "assistant" and message.tool_calls:
        return {"role": "assistant", "content": message.text or None,
                "tool_calls": [c.model_dump(include={"id", "type", "function"}) for c in message.tool_calls]}
    if message.role in _HISTORY_ROLES and message.text:
        return {"role": _HISTORY_ROLES[message.role], "content": message.text}
    return None


def prompt_of(body: ChatCompletionRequest) -> Prompt:
    last = body.messages[-1]
    for index, message in enumerate(body.messages):
        if message.role == "tool" and not message.tool_call_id:
            raise ApiProblem(400, "Bad Request", f"`messages[{index}]` is a tool result without its `tool_call_id`.",
                             errors=[{"code": "missing_required_parameter", "message": "tool_call_id",
                                      "field": f"messages[{index}].tool_call_id"}])
    if last.role not in _RESULT_ROLES and (last.role != "user" or not (last.text.strip() or last.image_params(0))):
        raise ApiProblem(400, "Bad Request", "The last message must be the user's, with text, or a tool result.",
                         errors=[{"code": "invalid_value", "message": "last message", "field": "messages"}])
    if len(last.text) > MAX_TEXT:
        raise ApiProblem(400, "Bad Request", f"The last message is longer than {MAX_TEXT} characters.",
                         errors=[{"code": "string_too_long", "message": "too long", "field": "messages"}])
    # The client's messages are the window, as sent (a conversation's window is the server's).
    # Ending with tool results, they all are the history and there are no new words.
    ends_with_result = last.role in _RESULT_ROLES
    sent = body.messages if ends_with_result else body.messages[:-1]
    earlier = [turn for turn in _function_turns(sent) if turn is not None]
    client = ClientChoices(tools=body.tools or [], tool_choice=body.tool_choice,
                           parallel_tool_calls=body.parallel_tool_calls,
                           response_format=None if (body.response_format or {}).get("type", "text") == "text"
                           else body.response_format,
                           temperature=body.temperature, max_tokens=body.max_completion_tokens or body.max_tokens,
                           sampling=sampling_of(body))
    images = [where for index, message in enumerate(body.messages) for where in message.image_params(index)]
    return Prompt(text="" if ends_with_result else last.text, history=earlier, client=client,
                  parts=None if ends_with_result else last.parts(len(body.messages) - 1), image_parts=images)


SAMPLING_FIELDS = ("top_p", "stop", "seed", "presence_penalty", "frequency_penalty", "logit_bias", "reasoning_effort",
                   "verbosity", "user", "safety_identifier")


def sampling_of(body: ChatCompletionRequest) -> Sampling | None:
    return params.sampling_of({name: getattr(body, name) for name in SAMPLING_FIELDS})
