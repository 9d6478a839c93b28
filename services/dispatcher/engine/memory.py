"""In-process implementations of the engine's ports: used by unit tests and the benchmark, and
handy for running a graph without NATS."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from services.dispatcher.engine.checkpoint import Checkpoint
from shared.contract.events import EventBase
from shared.contract.tools import ToolDescriptor, ToolMeta, ToolReply

ToolFn = Callable[[dict[str, Any], ToolMeta], Awaitable[Any]]


class MemoryCheckpointStore:
    """Keeps serialized checkpoints, as the KV bucket does, so a loaded checkpoint never aliases
    the runner's live one."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.saves = 0

    async def load(self, task_id: str) -> Checkpoint | None:
        raw = self.data.get(task_id)
        return Checkpoint.from_bytes(raw) if raw is not None else None

    async def save(self, checkpoint: Checkpoint) -> None:
        self.saves += 1
        self.data[checkpoint.task_id] = checkpoint.to_bytes()

    async def delete(self, task_id: str) -> None:
        self.data.pop(task_id, None)


class EventLog:
    """Collects events in memory, numbering them like the bus publisher."""

    def __init__(self, start_n: int = 0, keep: bool = True) -> None:
        self.n = start_n
        self.keep = keep
        self.events: list[EventBase] = []

    async def emit(self, event: EventBase) -> EventBase:
        self.n += 1
        event.stamp(self.n)
        if self.keep:
            self.events.append(event)
        return event

    def of_type(self, kind: str) -> list[EventBase]:
        return [e for e in self.events if e.type == kind]


class LocalTools:
    """A ToolCaller over plain async functions. A raised exception becomes a clean tool error
    (code = its `code` attribute or `internal`), as the NATS tool services answer."""

    def __init__(self) -> None:
        self.functions: dict[str, ToolFn] = {}
        self.descriptors: dict[str, ToolDescriptor] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def add(self, name: str, fn: ToolFn, *, agent: bool = True, inject: tuple[str, ...] = (),
            schema: dict[str, Any] | None = None) -> None:
        self.functions[name] = fn
        self.descriptors[name] = ToolDescriptor(
            name=name, title=name, description=f"local tool {name}", agent=agent,
            input_schema=schema or {"type": "object"}, inject=list(inject), service="py",
        )

    async def list_tools(self) -> list[ToolDescriptor]:
        return list(self.descriptors.values())

    async def call(self, tool: str, args: dict[str, Any], meta: ToolMeta, *,
                   timeout_s: float | None = None) -> ToolReply:
        fn = self.functions.get(tool)
        if fn is None:
            return ToolReply.failure("no_responders", f"no service offers tool {tool!r}")
        self.calls.append((tool, args))
        try:
            if timeout_s is None:
                return ToolReply.success(await fn(args, meta))
            async with asyncio.timeout(timeout_s):
                return ToolReply.success(await fn(args, meta))
        except TimeoutError:
            return ToolReply.failure("timeout", f"tool {tool!r} timed out")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return ToolReply.failure(getattr(exc, "code", "internal"), str(exc))
