"""A LangGraph run's request body: every field `langgraph-sdk` (Python and JS) sends, each one
supported or refused with a 422 that names it (docs/API.md, "LangGraph"). A field no client
sends is refused too (`extra="forbid"`): nothing is silently ignored.

Accepted with nothing to do: `stream_resumable` (every `/lg` stream can be rejoined),
`durability`/`checkpoint_during` (every step of a run is stored as it happens, which meets
`sync`), `stream_subgraphs` (the chat agent has no subgraphs: the frames are the same),
`strict_resume` (a resume is always checked against the approval the thread waits for).
`checkpoint`/`checkpoint_id` (or `config.configurable.checkpoint_id`): the run goes on from that
checkpoint (a turn); an older one starts a branch (chat/lineage.py)."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from services.gateway.protocols.langgraph import assistants, recursion
from services.gateway.protocols.langgraph.refusals import refuse_when_set, unsupported

STREAM_MODES: Final = frozenset({"values", "updates", "messages-tuple", "messages", "custom", "events", "debug",
                                 "tasks", "checkpoints"})
# Modes the SDK accepts that Agentix does not produce, and why.
REFUSED_MODES: Final = {
    "tools": "tool frames are not produced: tool calls and results come as `custom` and `events`",
    "lifecycle": "the chat agent has no subgraphs to report",
}
CONFIGURABLE: Final = frozenset({"model", "thread_id", "assistant_id", "graph_id", "user_id", "checkpoint_id",
                                 "checkpoint_ns", "checkpoint_map"})
CONTEXT: Final = frozenset({"model"})


def checkpoint_id_of(value: Any) -> str | None:
    """A checkpoint as clients give it: an id, `{checkpoint_id}`, or a config's `{configurable: {…}}`."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, dict):
        inner = value.get("configurable")
        found = (inner if isinstance(inner, dict) else value).get("checkpoint_id")
        return found if isinstance(found, str) and found else None
    return None


def check_modes(stream_mode: str | list[str] | None) -> str | list[str] | None:
    asked = [stream_mode] if isinstance(stream_mode, str) else list(stream_mode or ())
    for mode in asked:
        if mode in REFUSED_MODES:
            raise unsupported(f"stream_mode: {mode}", REFUSED_MODES[mode])
        if mode and mode not in STREAM_MODES:
            raise ValueError(f"`stream_mode: {mode}` is not a LangGraph stream mode")
    return stream_mode


class RunCreate(BaseModel):
    """`POST /threads/{id}/runs[/stream|/wait]`, `POST /runs[/stream|/wait|/batch]`."""

    model_config = ConfigDict(extra="forbid")

    assistant_id: str = Field(default=assistants.CHAT_GRAPH, min_length=1, max_length=200)
    input: dict[str, Any] | None = None
    command: dict[str, Any] | None = None  # `resume`, `update`, `goto`: read (and refused) by command.py
    stream_mode: str | list[str] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] = "enqueue"
    if_not_exists: Literal["create", "reject"] = "reject"
    on_completion: Literal["delete", "keep"] | None = None
    on_disconnect: Literal["cancel", "continue"] | None = None
    stream_subgraphs: bool = False
    stream_resumable: bool = False
    durability: Literal["sync", "async", "exit"] | None = None
    checkpoint_during: bool | None = None
    strict_resume: bool = False
    # Where the run's end is POSTed in the LangGraph run-webhook shape (checked, SSRF, by the route).
    webhook: str | None = Field(default=None, max_length=2000)
    # Refused when given (a value that asks for nothing passes): see the validators.
    interrupt_before: Any = None
    interrupt_after: Any = None
    feedback_keys: Any = None
    checkpoint: Any = None
    checkpoint_id: Any = None
    after_seconds: Any = None
    langsmith_tracer: Any = None

    @field_validator("stream_mode")
    @classmethod
    def _modes(cls, value: str | list[str] | None) -> str | list[str] | None:
        return check_modes(value)

    _no_pauses = refuse_when_set("interrupt_before", "interrupt_after",
                                 why="the chat agent pauses only at its approvals (plan, high-risk tools)")

    @field_validator("webhook")
    @classmethod
    def _webhook(cls, value: str | None) -> str | None:
        return value or None  # an empty webhook asks for nothing

    _no_langsmith = refuse_when_set("feedback_keys", "langsmith_tracer", why="Agentix does not report to LangSmith")

    @field_validator("checkpoint", "checkpoint_id")
    @classmethod
    def _checkpoint(cls, value: Any, info: Any) -> Any:
        if value and checkpoint_id_of(value) is None:
            raise ValueError(f"`{info.field_name}` names a checkpoint: an id or `{{checkpoint_id}}`")
        return value or None

    def follows(self) -> str | None:
        """The checkpoint the run goes on from (`checkpoint`, `checkpoint_id` or
        `config.configurable.checkpoint_id`); None: the thread's latest."""
        configurable = (self.config or {}).get("configurable") or {}
        for given in (self.checkpoint_id, self.checkpoint, configurable.get("checkpoint_id")):
            found = checkpoint_id_of(given)
            if found is not None:
                return found
        return None

    _no_delay = refuse_when_set("after_seconds", why="runs start when posted (delayed runs are schedules: "
                                                     "/api/v1/schedules, or /lg crons)")

    def run_metadata(self) -> dict[str, Any]:
        """The run's metadata: `config.metadata` (where `RemoteGraph` puts its graph's step and
        node), then the body's own `metadata` over it."""
        return {**((self.config or {}).get("metadata") or {}), **(self.metadata or {})}

    @field_validator("config")
    @classmethod
    def _config(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for key, item in (value or {}).items():
            if key == "metadata" and not isinstance(item, dict | None):
                raise unsupported("config.metadata", "metadata is an object")
            if key == "recursion_limit":
                if (why := recursion.why_not(item)) is not None:
                    raise unsupported("config.recursion_limit", why)
                continue
            if key not in ("configurable", "metadata") and item not in (None, {}, []):
                raise unsupported(f"config.{key}", "`config.configurable`, `config.metadata` and "
                                                   "`config.recursion_limit` are read")
        for key in ((value or {}).get("configurable") or {}):
            if key not in CONFIGURABLE:
                raise unsupported(f"config.configurable.{key}", f"the keys read are {sorted(CONFIGURABLE)}")
        return value

    @field_validator("context")
    @classmethod
    def _context(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for key in value or {}:
            if key not in CONTEXT:
                raise unsupported(f"context.{key}", f"the keys read are {sorted(CONTEXT)}")
        return value
