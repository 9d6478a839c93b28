"""The graph `bench/e2e.py` runs on LangGraph's Agent Server (`langgraph dev`, from its own venv):
input → agent → agent → agent → output, each agent one streamed chat-completions call to the
model server at $BENCH_MODEL_URL, as the Agentix DSL of the bench does with three `agent` nodes.

The tokens go out through the stream writer (`stream_mode="custom"`): the `messages` modes only
see LangChain chat models' callbacks, and this graph calls the bare `openai` client, as the
bench asks."""

from __future__ import annotations

import os
from typing import TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from openai import AsyncOpenAI


class State(TypedDict):
    text: str


_client: AsyncOpenAI | None = None


def client() -> AsyncOpenAI:
    # One client (one connection pool) for the server's life, as Agentix's model pool keeps one;
    # made on first use, inside the loop that runs the graph.
    global _client
    if _client is None:
        _client = AsyncOpenAI(base_url=os.environ["BENCH_MODEL_URL"], api_key="bench", max_retries=0)
    return _client


async def agent(state: State) -> State:
    write = get_stream_writer()
    stream = await client().chat.completions.create(
        model=os.environ.get("BENCH_MODEL", "m"), messages=[{"role": "user", "content": state["text"]}],
        stream=True)
    parts: list[str] = []
    async for chunk in stream:
        text = chunk.choices[0].delta.content if chunk.choices else None
        if text:
            parts.append(text)
            write({"token": text})
    return {"text": "".join(parts)}


builder = StateGraph(State)
for name in ("agent1", "agent2", "agent3"):
    builder.add_node(name, agent)
builder.add_edge(START, "agent1")
builder.add_edge("agent1", "agent2")
builder.add_edge("agent2", "agent3")
builder.add_edge("agent3", END)
graph = builder.compile()
