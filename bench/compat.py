"""The client facades' throughput: tokens/s of one chat answer read through a facade vs through
the native SSE stream (`GET /api/v1/runs/{id}/events`), same gateway and dispatcher processes,
same scripted model (one token per chunk), same run. Target: each facade ≥ 0.8× native.
Facades: `/lg` with the real langgraph-sdk (messages-tuple), and `/v1/chat/completions` streamed
on a conversation (`X-Agentix-Conversation-Id`) and stateless (a plain task on the mode's
graph), and `/v1/responses` streamed (the typed events); the OpenAI streams are read with plain
httpx, so the server's path is measured rather than a client library's chunk objects.

Each facade is one function `(services, client) -> tokens read`, registered in FACADES; the
native reader is the baseline every facade is measured against.

Run: python -m bench.compat [--tokens 5000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable

import httpx
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from agentix.sse import parse_stream
from bench.token_path import TOKEN, Services, start_model_server
from shared.natsd import NatsServer
from tests.support.openai_server import ScriptClient, reply

Reader = Callable[[Services, httpx.AsyncClient], Awaitable[int]]
TARGET = 0.8


def _headers(services: Services) -> dict[str, str]:
    return {"Authorization": f"Bearer {services.token}"}


async def native(services: Services, client: httpx.AsyncClient) -> int:
    """A message posted to a new conversation, its run read over the native SSE stream."""
    base = f"{services.url}/api/v1"
    made = await client.post(f"{base}/conversations", json={"mode": "direct"}, headers=_headers(services))
    made.raise_for_status()
    posted = await client.post(f"{base}/conversations/{made.json()['id']}/messages", json={"text": "go"},
                               headers=_headers(services))
    posted.raise_for_status()
    chars = 0
    async with client.stream("GET", f"{base}/runs/{posted.json()['run']['id']}/events",
                             headers=_headers(services)) as stream:
        buffered: list[str] = []
        async for line in stream.aiter_lines():
            buffered.append(line)
            if line:
                continue
            for event in parse_stream(iter(buffered)):
                if event.event == "token":
                    chars += len(event.data["text"])
                elif event.event == "done":
                    return chars // len(TOKEN)
            buffered = []
    raise RuntimeError("the native stream ended without `done`")


_lg_clients: dict[str, LangGraphClient] = {}


async def langgraph(services: Services, client: httpx.AsyncClient) -> int:
    """The same answer through `/lg` with the real SDK: a thread, a run streamed as messages-tuple.
    One SDK client for every run, as the other readers share one httpx client (and as an
    application keeps its client): its connections are reused, not made again per answer."""
    lg = _lg_clients.get(services.url)
    if lg is None:
        lg = _lg_clients[services.url] = get_client(url=f"{services.url}/lg", api_key=services.token)
    thread = await lg.threads.create()
    chars = 0
    async for part in lg.runs.stream(thread["thread_id"], "chat-direct",
                                     input={"messages": [{"role": "user", "content": "go"}]},
                                     stream_mode="messages-tuple"):
        if part.event == "messages":
            chars += len(part.data[0]["content"])
    return chars // len(TOKEN)


async def _openai(services: Services, client: httpx.AsyncClient, *, stateless: bool) -> int:
    headers = _headers(services)
    if not stateless:
        made = await client.post(f"{services.url}/api/v1/conversations", json={"mode": "direct"}, headers=headers)
        made.raise_for_status()
        headers["X-Agentix-Conversation-Id"] = made.json()["id"]
    body = {"model": "agentix-direct", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    chars = 0
    async with client.stream("POST", f"{services.url}/v1/chat/completions", json=body, headers=headers) as stream:
        if stream.status_code != 200:
            raise RuntimeError(f"completion refused: {stream.status_code} {(await stream.aread())[:300]!r}")
        async for line in stream.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = line[len("data: "):]
            if data == "[DONE]":
                return chars // len(TOKEN)
            chunk = json.loads(data)
            if "error" in chunk:
                raise RuntimeError(f"completion failed: {chunk['error']}")
            for choice in chunk["choices"]:
                chars += len(choice["delta"].get("content") or "")
    raise RuntimeError("the OpenAI stream ended without [DONE]")


async def openai_conversation(services: Services, client: httpx.AsyncClient) -> int:
    """The same answer as OpenAI chunks, the message added to a conversation."""
    return await _openai(services, client, stateless=False)


async def openai_stateless(services: Services, client: httpx.AsyncClient) -> int:
    """The same answer as OpenAI chunks, no conversation kept."""
    return await _openai(services, client, stateless=True)


async def openai_responses(services: Services, client: httpx.AsyncClient) -> int:
    """The same answer as the Responses API's typed events (`POST /v1/responses`, streamed)."""
    body = {"model": "agentix-direct", "stream": True, "input": "go"}
    chars = 0
    async with client.stream("POST", f"{services.url}/v1/responses", json=body, headers=_headers(services)) as stream:
        if stream.status_code != 200:
            raise RuntimeError(f"response refused: {stream.status_code} {(await stream.aread())[:300]!r}")
        async for line in stream.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[len("data: "):])
            if event["type"] == "response.output_text.delta":
                chars += len(event["delta"])
            elif event["type"] in ("response.failed", "error"):
                raise RuntimeError(f"response failed: {event}")
            elif event["type"] == "response.completed":
                return chars // len(TOKEN)
    raise RuntimeError("the Responses stream ended without response.completed")


FACADES: dict[str, Reader] = {"langgraph": langgraph, "openai": openai_conversation,
                              "openai-nostate": openai_stateless, "responses": openai_responses}


async def rate(read: Reader, services: Services, client: httpx.AsyncClient, tokens: int) -> float:
    start = time.perf_counter()
    got = await read(services, client)
    if got != tokens:
        raise RuntimeError(f"{read.__name__}: expected {tokens} tokens, got {got}")
    return tokens / (time.perf_counter() - start)


async def main(tokens: int, rounds: int) -> int:
    model_proc, url = start_model_server()
    nats = NatsServer().start()
    services = Services(nats.url, url)
    try:
        ScriptClient(url).script([], then=reply([TOKEN] * tokens))
        services.start()
        async with httpx.AsyncClient(timeout=300) as client:
            for read in (native, *FACADES.values()):  # warm up: first runs pay for imports and connections
                await read(services, client)
            rates: dict[str, list[float]] = {"native": [], **{name: [] for name in FACADES}}
            readers: list[tuple[str, Reader]] = [("native", native), *FACADES.items()]
            for index in range(rounds):  # interleaved, the order turning, so a slow moment hits every reader
                for name, read in readers[index % len(readers):] + readers[:index % len(readers)]:
                    rates[name].append(await rate(read, services, client, tokens))
        base = statistics.median(rates["native"])
        print(f"{tokens} tokens per answer, median of {rounds} rounds")
        print(f"  native SSE     {base:10.0f} tokens/s")
        failed = 0
        for name in FACADES:
            got = statistics.median(rates[name])
            ok = got >= TARGET * base
            failed += not ok
            verdict = "ok" if ok else "BELOW"
            print(f"  {name:<14} {got:10.0f} tokens/s  {got / base:5.2f}×  {verdict} (target ≥ {TARGET}×)")
        return 1 if failed else 0
    finally:
        for lg in _lg_clients.values():
            await lg.aclose()
        services.stop()
        nats.stop()
        model_proc.terminate()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    raise SystemExit(asyncio.run(main(args.tokens, args.rounds)))
