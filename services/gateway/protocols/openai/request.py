"""The body of `POST /v1/chat/completions`, as much of it as Agentix uses, and what it means for
a run: the user's last message is the run's text, the messages before it are the history the
client holds (a stateless request's memory window, `tool` messages left out).

Sampling parameters (`temperature`, `max_tokens`, …) are accepted and ignored: the assistant's
graph and the platform's model chain and token budget decide them. What Agentix does not honour is
a 400 naming the parameter: `n` > 1, `logprobs`, `top_logprobs`, audio output, client-side
`tools`/`functions` (the assistant's own server-side tools run), a `response_format` other than
text, and content parts other than text (images, audio, files).

The tier-1 guardrail reads what the user wrote (`Prompt.strings`): the user's messages, never the
client's own system/developer instructions, the assistant's turns or tool results."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from services.gateway.chat.queue import MAX_TEXT
from services.gateway.problems import ApiProblem

# The roles that are part of a conversation's history (`developer` is OpenAI's newer `system`).
_HISTORY_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str = Field(max_length=32)
    content: str | list[ContentPart] | None = None

    @property
    def text(self) -> str:
        """The message's text: a string, or its text parts joined (images and audio are not read)."""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text or "" for p in self.content or [] if p.type == "text")


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


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
    function_call: str | dict[str, object] | None = None
    response_format: dict[str, object] | None = None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class Prompt(BaseModel):
    """The run's input: the last user message, and the turns the client sent before it."""

    text: str
    history: list[dict[str, str]]

    def strings(self) -> list[str]:
        """What the tier-1 guardrail reads: what the user wrote (the last message and the user's
        earlier turns). System/developer messages are the client's own instructions (an agent
        framework's retry prompt may well warn the model about `<system>` tags) and assistant
        turns are the model's: neither is the user's input."""
        return [self.text, *(m["content"] for m in self.history if m["role"] == "user")]


def _unsupported(param: str, why: str) -> ApiProblem:
    return ApiProblem(400, "Bad Request", f"`{param}` is not supported: {why}",
                      errors=[{"code": "unsupported_parameter", "message": why, "field": param}])


def refuse_unsupported(body: ChatCompletionRequest) -> None:
    """A 400 naming the first parameter Agentix cannot honour (never silently ignored)."""
    if body.n is not None and body.n != 1:
        raise _unsupported("n", "an assistant run gives one answer; send n=1 or leave it out.")
    if body.logprobs:
        raise _unsupported("logprobs", "an assistant's answer comes from a run, not one sampled sequence.")
    if body.top_logprobs:
        raise _unsupported("top_logprobs", "an assistant's answer comes from a run, not one sampled sequence.")
    if body.audio is not None or any(m != "text" for m in body.modalities or []):
        raise _unsupported("audio" if body.audio is not None else "modalities",
                           "Agentix answers in text only.")
    for param in ("tools", "functions"):
        if getattr(body, param):
            raise _unsupported(param, "client-side tools are not offered to the model yet; the assistant's own "
                                      "server-side tools run (model agentix-react).")
    for param in ("tool_choice", "function_call"):
        if getattr(body, param) not in (None, "none", "auto"):
            raise _unsupported(param, "there are no client-side tools to choose from.")
    if body.response_format is not None and body.response_format.get("type") != "text":
        raise _unsupported("response_format", "JSON mode and JSON schemas are not passed to the model yet; "
                                              "ask for JSON in the message, or use a workflow whose agent has "
                                              "`output: json`.")
    for index, message in enumerate(body.messages):
        parts = message.content if isinstance(message.content, list) else []
        other = next((p.type for p in parts if p.type != "text"), None)
        if other is not None:
            raise _unsupported(f"messages[{index}].content", f"`{other}` content parts do not reach the model: "
                                                             "the assistants take text only.")


def prompt_of(body: ChatCompletionRequest) -> Prompt:
    last = body.messages[-1]
    if last.role != "user" or not last.text.strip():
        raise ApiProblem(400, "Bad Request", "The last message must be the user's, with text.",
                         errors=[{"code": "invalid_value", "message": "last message", "field": "messages"}])
    if len(last.text) > MAX_TEXT:
        raise ApiProblem(400, "Bad Request", f"The last message is longer than {MAX_TEXT} characters.",
                         errors=[{"code": "string_too_long", "message": "too long", "field": "messages"}])
    # The client's messages are the window, as sent (a conversation's window is the server's).
    earlier = [{"role": _HISTORY_ROLES[m.role], "content": m.text} for m in body.messages[:-1]
               if m.role in _HISTORY_ROLES and m.text]
    return Prompt(text=last.text, history=earlier)
