"""What a node had already streamed when its dispatcher died, and how the new owner goes on
without streaming it again.

A takeover resumes from the checkpoint, so the node that was running is asked of the model again.
Its clients have already seen part of its answer (the task's `token` events since the node's
last start). The new owner re-asks the model and keeps the regenerated tokens to itself while
they repeat that published prefix; from the first character past it, tokens stream as usual. So
the node's output is exactly the published prefix plus what followed, which is what clients saw.

If the regeneration departs from the prefix (a sampled model answers differently), or ends before
reaching its end, the prefix stands — clients saw it — and the model is asked once more, with the
prefix given as the start of its answer (a last `assistant` message), to continue it; what it
adds is streamed and appended. The diverged regeneration is stopped as soon as it departs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace

from services.dispatcher.llm.api import Delta, DeltaSink, LLMRequest, LLMResult
from shared.contract.events import AnyEvent
from shared.errors import AgentixError

Call = Callable[[LLMRequest, DeltaSink], Awaitable[LLMResult]]
"""One streamed model call with the node's budget and notices (the request, where deltas go)."""


def already_streamed(events: Iterable[AnyEvent]) -> dict[str, str]:
    """Per node that started and has not ended, the text of the tokens it has streamed since
    its last start (a node run again by a retry starts over). Nodes with none are left out, and
    so is a node whose answer was evaluated: its tokens may be two answers (`evaluate`)."""
    streamed: dict[str, list[str]] = {}
    for event in events:
        node = event.node_id
        if node is None:
            continue
        if event.type == "node.start":
            streamed[node] = []
        elif event.type in ("node.end", "eval"):  # after `eval` (a poor answer) come a second answer's tokens
            streamed.pop(node, None)
        elif event.type == "token" and node in streamed:
            streamed[node].append(event.text)
    return {node: "".join(parts) for node, parts in streamed.items() if any(parts)}


class PrefixDiverged(AgentixError):
    """The regenerated answer departed from what clients already saw; the call is stopped."""

    code = "prefix_diverged"


class _PrefixGuard:
    """A delta sink that swallows the regenerated text while it repeats `prefix` and passes on
    whatever comes after it. Thinking is swallowed too until the prefix is passed: it came before
    the answer clients already saw."""

    def __init__(self, prefix: str, sink: DeltaSink) -> None:
        self.prefix = prefix
        self.sink = sink
        self.matched = 0  # characters of the prefix regenerated so far

    @property
    def passed(self) -> bool:
        return self.matched >= len(self.prefix)

    async def __call__(self, delta: Delta) -> None:
        if self.passed:
            await self.sink(delta)
            return
        if delta.kind != "token":
            return
        expected = self.prefix[self.matched:self.matched + len(delta.text)]
        if not delta.text.startswith(expected):  # `expected` is shorter only where the prefix ends
            raise PrefixDiverged(f"the regenerated answer departs from the streamed prefix at {self.matched}")
        self.matched += len(expected)
        rest = delta.text[len(expected):]
        if rest:
            await self.sink(Delta("token", rest, delta.model))


async def complete_after_prefix(call: Call, request: LLMRequest, prefix: str, sink: DeltaSink) -> LLMResult:
    """Ask again without streaming `prefix` twice; the result's text starts with `prefix`."""
    guard = _PrefixGuard(prefix, sink)
    try:
        result = await call(request, guard)
    except PrefixDiverged:
        result = None
    if result is not None and guard.passed:
        return result
    go_on = replace(request, messages=[*request.messages, {"role": "assistant", "content": prefix}])
    rest = await call(go_on, sink)
    if result is not None:
        rest.usage = result.usage.add(rest.usage)
    rest.text = prefix + rest.text
    return rest
