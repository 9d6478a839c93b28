"""A scripted HTTP server speaking the OpenAI protocol, for tests and benchmarks.

Real HTTP/1.1 on 127.0.0.1 (keep-alive, chunked SSE), so the real `openai` client talks to it.
Endpoints: `POST /v1/chat/completions` (streamed and not), `POST /v1/embeddings`, `POST /v1/rerank`,
`GET /v1/models`, and control endpoints for other processes: `POST /_script`,
`GET /_requests`, `POST /_reset`, `GET /_health`, `POST /_release {gate}` (lets a streamed reply
scripted with `gate` go on: a test holds an answer mid-stream for as long as it needs, no timing).

Three ways to run it:

    # same event loop as the test
    async with OpenAIServer() as srv:
        client = AsyncOpenAI(base_url=srv.url, api_key="k")
        srv.script([reply("hello"), rate_limited(retry_after=1)], model="primary")

    # background thread (its own loop) — for sync code or CPU isolation
    srv = OpenAIServer().start_in_thread(); ...; srv.stop_thread()

    # another process (the dispatcher in e2e tests talks to it by URL)
    python -m tests.support.openai_server --port 0 [--script steps.json] [--api-key K]
    # prints "READY http://127.0.0.1:PORT/v1"; script it with ScriptClient(url).script([...])

A script is a queue of steps per model (or for any model, `model=None`). Each chat request takes
the next step of its model's queue, else of the shared queue, else the `then` step of the last
`script()` call, else an echo of the last user message. Steps are plain JSON dicts, built with
the helpers below: `reply`, `tool_call`, `error`, `rate_limited`, `server_error`,
`auth_failure`, `model_not_found`, `context_too_long`, `hang`, `malformed`.

Real checks besides scripts: `api_key=` makes a wrong/missing key a real 401, `models=` makes an
unknown model a real 404, `context_tokens=` makes a too long prompt a real 400
`context_length_exceeded`. Every request received is recorded (`srv.requests()`).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import json
import math
import re
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

Step = dict[str, Any]
MAX_RECORDED = 2000
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


# --------------------------------------------------------------------------- step builders


def tool_call(name: str, arguments: dict[str, Any] | str, id: str | None = None) -> dict[str, Any]:
    """One tool call of a `reply`. `arguments` may be a raw (even invalid) JSON string."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": id, "name": name, "arguments": args}


def reply(
    text: str | list[str] = "",
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    reasoning: str | list[str] | None = None,
    reasoning_field: str = "reasoning_content",
    usage: bool | dict[str, int] = True,
    chunk_chars: int = 4,
    delay_s: float = 0.0,
    finish_reason: str | None = None,
    gate: str | None = None,
    gate_after: int = 0,
    first_delay_s: float = 0.0,
) -> Step:
    """A successful answer. `text`/`reasoning` as a list are the exact stream chunks; as a str
    they are cut into `chunk_chars` pieces. `usage=False` omits usage, a dict sets it, True
    computes it. `delay_s` sleeps before every streamed chunk, `first_delay_s` once before the
    first (a model's time to first token). With `gate`, the stream stops after `gate_after`
    events until `POST /_release {"gate": gate}`."""
    return {
        "first_delay_s": first_delay_s,
        "gate": gate,
        "gate_after": gate_after,
        "kind": "reply",
        "text": text,
        "tool_calls": tool_calls or [],
        "reasoning": reasoning,
        "reasoning_field": reasoning_field,
        "usage": usage,
        "chunk_chars": chunk_chars,
        "delay_s": delay_s,
        "finish_reason": finish_reason,
    }


def error(
    status: int,
    message: str,
    *,
    code: str | None = None,
    type: str = "invalid_request_error",
    param: str | None = None,
    retry_after: float | None = None,
    headers: dict[str, str] | None = None,
) -> Step:
    """An HTTP error with an OpenAI error body `{"error": {message, type, param, code}}`."""
    return {
        "kind": "error",
        "status": status,
        "message": message,
        "code": code,
        "type": type,
        "param": param,
        "retry_after": retry_after,
        "headers": headers or {},
    }


def rate_limited(retry_after: float | None = 1, message: str = "Rate limit reached, slow down") -> Step:
    return error(429, message, code="rate_limit_exceeded", type="requests", retry_after=retry_after)


def server_error(status: int = 500, message: str = "The server had an error processing your request") -> Step:
    return error(status, message, code=None, type="server_error")


def auth_failure(message: str = "Incorrect API key provided") -> Step:
    return error(401, message, code="invalid_api_key")


def model_not_found(model: str = "unknown") -> Step:
    return error(404, f"The model `{model}` does not exist or you do not have access to it.", code="model_not_found")


def context_too_long(limit: int = 8192, asked: int = 9000) -> Step:
    return error(
        400,
        f"This model's maximum context length is {limit} tokens. However, your messages resulted "
        f"in {asked} tokens. Please reduce the length of the messages.",
        code="context_length_exceeded",
        param="messages",
    )


def hang(text: str | list[str] = "", seconds: float = 3600.0, chunk_chars: int = 4) -> Step:
    """Never answer (within `seconds`). With `text` on a streamed request: send those chunks
    first, then stall mid-stream."""
    return {"kind": "hang", "text": text, "seconds": seconds, "chunk_chars": chunk_chars}


def malformed(text: str | list[str] = "", chunk_chars: int = 4) -> Step:
    """Streamed: send `text` chunks, then a chunk that is not JSON. Not streamed: a 200 whose
    body is not JSON."""
    return {"kind": "malformed", "text": text, "chunk_chars": chunk_chars}


# --------------------------------------------------------------------------- helpers


def estimate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4)) if text else 0


def _pieces(text: str | list[str], size: int) -> list[str]:
    if isinstance(text, list):
        return [t for t in text if t]
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def prompt_tokens_of(body: dict[str, Any]) -> int:
    total = 0
    for m in body.get("messages") or []:
        total += 4 + estimate_tokens(_message_text(m.get("content")))
        for tc in m.get("tool_calls") or []:
            total += estimate_tokens(json.dumps(tc))
    if body.get("tools"):
        total += estimate_tokens(json.dumps(body["tools"]))
    return total


def embed(text: str, dim: int) -> list[float]:
    """Deterministic bag-of-words hashing embedding: texts sharing words have close vectors."""
    vec = [0.0] * dim
    for word in re.findall(r"\w+", text.lower()):
        h = hashlib.blake2b(word.encode(), digest_size=8).digest()
        idx = int.from_bytes(h[:4], "little") % dim
        vec[idx] += 1.0 if h[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


# --------------------------------------------------------------------------- the server


class OpenAIServer:
    """See the module docstring. Not thread-safe except `script`/`requests`/`reset`, which
    may be called from any thread."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        models: list[str] | None = None,
        context_tokens: int | None = None,
        embedding_dim: int = 64,
    ) -> None:
        self.host = host
        self.port = port
        self.api_key = api_key
        self.models = models
        self.context_tokens = context_tokens
        self.embedding_dim = embedding_dim
        self._lock = threading.Lock()
        self._queues: dict[tuple[str, str | None], deque[Step]] = {}
        self._then: dict[tuple[str, str | None], Step] = {}
        self._requests: deque[dict[str, Any]] = deque(maxlen=MAX_RECORDED)
        self._gates: dict[str, asyncio.Event] = {}  # touched on the server's loop only
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._seq = 0

    # ---- public API

    @property
    def url(self) -> str:
        """The `base_url` for the openai client (ends in `/v1`)."""
        return f"http://{self.host}:{self.port}/v1"

    def script(
        self,
        steps: list[Step],
        *,
        model: str | None = None,
        then: Step | None = None,
        endpoint: str = "chat",
        append: bool = False,
    ) -> None:
        """Queue `steps` for requests to `model` (None: any model). `then` answers once the
        queue is empty (default: echo). `endpoint` is "chat" or "embeddings" (for embeddings
        only error/hang steps have an effect)."""
        key = (endpoint, model)
        with self._lock:
            if not append or key not in self._queues:
                self._queues[key] = deque()
            self._queues[key].extend(steps)
            if then is not None:
                self._then[key] = then
            elif not append:
                self._then.pop(key, None)

    def requests(self, path: str | None = "/v1/chat/completions") -> list[dict[str, Any]]:
        """Recorded requests `{path, method, model, body, headers}`, oldest first."""
        with self._lock:
            return [r for r in self._requests if path is None or r["path"] == path]

    def reset(self) -> None:
        with self._lock:
            self._queues.clear()
            self._then.clear()
            self._requests.clear()

    async def start(self) -> OpenAIServer:
        self._server = await asyncio.start_server(self._serve_conn, self.host, self.port, limit=2**24)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._conns):
            task.cancel()
        for task in list(self._conns):
            with contextlib.suppress(BaseException):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    async def __aenter__(self) -> OpenAIServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def start_in_thread(self) -> OpenAIServer:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            loop.run_until_complete(self.start())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop())
            loop.close()

        self._thread = threading.Thread(target=run, name="openai-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("scripted OpenAI server did not start")
        return self

    def stop_thread(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None

    # ---- HTTP plumbing

    async def _serve_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                method, target, _ = line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = h.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0") or 0)
                body = await reader.readexactly(length) if length else b""
                keep = await self._handle(method, target.split("?", 1)[0], headers, body, writer)
                if not keep or headers.get("connection", "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        except asyncio.CancelledError:
            # Ending quietly: asyncio logs a cancelled connection task as an error otherwise.
            pass
        finally:
            self._conns.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    @staticmethod
    async def _send(
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        *,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        head = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
        ]
        head += [f"{k}: {v}" for k, v in (headers or {}).items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await writer.drain()

    async def _send_json(
        self, writer: asyncio.StreamWriter, status: int, data: Any, headers: dict[str, str] | None = None
    ) -> None:
        await self._send(writer, status, json.dumps(data).encode(), headers=headers)

    async def _handle(
        self, method: str, path: str, headers: dict[str, str], raw: bytes, writer: asyncio.StreamWriter
    ) -> bool:
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            await self._send_json(writer, 400, _err_body("request body is not JSON"))
            return True
        if path.startswith("/_"):
            return await self._control(method, path, body, writer)
        with self._lock:
            self._requests.append(
                {
                    "path": path,
                    "method": method,
                    "model": body.get("model") if isinstance(body, dict) else None,
                    "body": body,
                    "headers": {k: v for k, v in headers.items() if k in ("authorization", "user-agent")},
                }
            )
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            await self._send_json(writer, 401, _err_body("Incorrect API key provided", code="invalid_api_key"))
            return True
        if path == "/v1/models" and method == "GET":
            await self._send_json(
                writer,
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": "agentix-test"}
                        for m in self._known_models()
                    ],
                },
            )
            return True
        if path == "/v1/chat/completions" and method == "POST":
            return await self._chat(body, writer)
        if path == "/v1/embeddings" and method == "POST":
            return await self._embeddings(body, writer)
        if path in ("/v1/rerank", "/rerank") and method == "POST":
            return await self._rerank(body, writer)
        await self._send_json(writer, 404, _err_body(f"no route {method} {path}", code="unknown_url"))
        return True

    async def _control(self, method: str, path: str, body: Any, writer: asyncio.StreamWriter) -> bool:
        if path == "/_script" and method == "POST":
            self.script(
                body.get("steps", []),
                model=body.get("model"),
                then=body.get("then"),
                endpoint=body.get("endpoint", "chat"),
                append=bool(body.get("append")),
            )
            await self._send_json(writer, 200, {"ok": True})
        elif path == "/_requests" and method == "GET":
            await self._send_json(writer, 200, {"requests": self.requests(None)})
        elif path == "/_reset" and method == "POST":
            self.reset()
            await self._send_json(writer, 200, {"ok": True})
        elif path == "/_health":
            await self._send_json(writer, 200, {"ok": True})
        elif path == "/_release" and method == "POST":
            self._gate(str(body.get("gate", ""))).set()
            await self._send_json(writer, 200, {"ok": True})
        else:
            await self._send_json(writer, 404, _err_body(f"no control route {path}"))
        return True

    def _gate(self, name: str) -> asyncio.Event:
        return self._gates.setdefault(name, asyncio.Event())

    def _known_models(self) -> list[str]:
        with self._lock:
            scripted = {m for (_, m) in self._queues if m}
        return sorted(set(self.models or []) | scripted)

    def _next_step(self, endpoint: str, model: str | None) -> Step | None:
        with self._lock:
            for key in ((endpoint, model), (endpoint, None)):
                queue = self._queues.get(key)
                if queue:
                    return queue.popleft()
            for key in ((endpoint, model), (endpoint, None)):
                if key in self._then:
                    return self._then[key]
        return None

    # ---- chat completions

    async def _chat(self, body: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
        model = str(body.get("model") or "")
        stream = bool(body.get("stream"))
        if self.models is not None and model not in self.models:
            await self._send_error(writer, model_not_found(model))
            return True
        prompt_tokens = prompt_tokens_of(body)
        if self.context_tokens is not None and prompt_tokens > self.context_tokens:
            await self._send_error(writer, context_too_long(self.context_tokens, prompt_tokens))
            return True
        step = self._next_step("chat", model) or reply(_echo(body))
        kind = step.get("kind")
        if kind == "error":
            await self._send_error(writer, step)
            return True
        if kind == "hang" and (not stream or not step.get("text")):
            await asyncio.sleep(float(step.get("seconds", 3600)))
            return False
        if kind == "malformed" and not stream:
            await self._send(writer, 200, b'{"id": "chatcmpl-broken", "choices": [')
            return True
        self._seq += 1
        cid = f"chatcmpl-{self._seq}"
        if not stream:
            await self._send_json(writer, 200, _completion(cid, model, step, prompt_tokens))
            return True
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return await self._stream(writer, cid, model, step, prompt_tokens, include_usage)

    async def _send_error(self, writer: asyncio.StreamWriter, step: Step) -> None:
        headers = dict(step.get("headers") or {})
        if step.get("retry_after") is not None:
            ra = float(step["retry_after"])
            headers["Retry-After"] = str(int(ra)) if ra == int(ra) else str(ra)
            headers["retry-after-ms"] = str(int(ra * 1000))
        body = _err_body(
            step["message"],
            code=step.get("code"),
            type=step.get("type", "invalid_request_error"),
            param=step.get("param"),
        )
        await self._send_json(writer, int(step["status"]), body, headers)

    async def _stream(
        self,
        writer: asyncio.StreamWriter,
        cid: str,
        model: str,
        step: Step,
        prompt_tokens: int,
        include_usage: bool,
    ) -> bool:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        delay = float(step.get("delay_s") or 0.0)
        if step.get("first_delay_s"):
            await asyncio.sleep(float(step["first_delay_s"]))
        sent = 0
        for event in _stream_events(cid, model, step, prompt_tokens, include_usage):
            if delay:
                await asyncio.sleep(delay)
            data = event.encode()
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            sent += 1
            if delay or sent % 32 == 0:
                await writer.drain()
            if step.get("gate") and sent == int(step.get("gate_after") or 0):
                await writer.drain()
                await self._gate(str(step["gate"])).wait()
        await writer.drain()
        if step.get("kind") == "hang":
            await asyncio.sleep(float(step.get("seconds", 3600)))
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return step.get("kind") != "malformed"

    # ---- embeddings

    async def _embeddings(self, body: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
        model = str(body.get("model") or "")
        step = self._next_step("embeddings", model)
        if step and step.get("kind") == "error":
            await self._send_error(writer, step)
            return True
        if step and step.get("kind") == "hang":
            await asyncio.sleep(float(step.get("seconds", 3600)))
            return False
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        if not texts or not all(isinstance(t, str) for t in texts):
            await self._send_json(writer, 400, _err_body("'input' must be a string or a list of strings"))
            return True
        dim = int(body.get("dimensions") or self.embedding_dim)
        b64 = body.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(texts):
            vec = embed(text, dim)
            value: Any = base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode() if b64 else vec
            data.append({"object": "embedding", "index": i, "embedding": value})
        tokens = sum(estimate_tokens(t) for t in texts)
        await self._send_json(
            writer,
            200,
            {
                "object": "list",
                "data": data,
                "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )
        return True


    # ---- rerank (the vLLM / Jina / TEI shape)

    async def _rerank(self, body: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
        step = self._next_step("rerank", str(body.get("model") or ""))
        if step and step.get("kind") == "error":
            await self._send_error(writer, step)
            return True
        query, docs = body.get("query"), body.get("documents")
        if not isinstance(query, str) or not isinstance(docs, list):
            await self._send_json(writer, 400, _err_body("'query' (string) and 'documents' (list) are required"))
            return True
        words = set(re.findall(r"\w+", query.lower()))
        scores = [len(words & set(re.findall(r"\w+", str(d).lower()))) / (len(words) or 1) for d in docs]
        order = sorted(range(len(docs)), key=lambda i: -scores[i])[: int(body.get("top_n") or len(docs))]
        results = [{"index": i, "relevance_score": round(scores[i], 6)} for i in order]
        await self._send_json(writer, 200, {"model": body.get("model"), "results": results})
        return True


def _err_body(
    message: str, *, code: str | None = None, type: str = "invalid_request_error", param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def _echo(body: dict[str, Any]) -> str:
    for m in reversed(body.get("messages") or []):
        if m.get("role") == "user":
            return "echo: " + _message_text(m.get("content"))
    return "echo"


def _tool_calls_of(step: Step) -> list[dict[str, Any]]:
    return [
        {
            "id": tc.get("id") or f"call_{i}_{tc['name']}",
            "type": "function",
            "function": {"name": tc["name"], "arguments": tc["arguments"]},
        }
        for i, tc in enumerate(step.get("tool_calls") or [])
    ]


def _usage(step: Step, prompt_tokens: int) -> dict[str, int] | None:
    usage = step.get("usage", True)
    if usage is False:
        return None
    if isinstance(usage, dict):
        u = dict(usage)
        u.setdefault("total_tokens", u.get("prompt_tokens", 0) + u.get("completion_tokens", 0))
        return u
    text = step.get("text") or ""
    text = "".join(text) if isinstance(text, list) else text
    completion = estimate_tokens(text) + sum(estimate_tokens(tc["arguments"]) for tc in step.get("tool_calls") or [])
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion, "total_tokens": prompt_tokens + completion}


def _completion(cid: str, model: str, step: Step, prompt_tokens: int) -> dict[str, Any]:
    text = step.get("text") or ""
    text = "".join(text) if isinstance(text, list) else text
    calls = _tool_calls_of(step)
    message: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    if step.get("reasoning"):
        r = step["reasoning"]
        message[step.get("reasoning_field") or "reasoning_content"] = "".join(r) if isinstance(r, list) else r
    out: dict[str, Any] = {
        "id": cid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": step.get("finish_reason") or ("tool_calls" if calls else "stop"),
            }
        ],
    }
    usage = _usage(step, prompt_tokens)
    if usage is not None:
        out["usage"] = usage
    return out


def _stream_events(cid: str, model: str, step: Step, prompt_tokens: int, include_usage: bool) -> Iterator[str]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        data = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(data)}\n\n"

    size = int(step.get("chunk_chars") or 4)
    yield chunk({"role": "assistant", "content": ""})
    if step.get("reasoning"):
        field = step.get("reasoning_field") or "reasoning_content"
        for piece in _pieces(step["reasoning"], size):
            yield chunk({field: piece})
    for piece in _pieces(step.get("text") or "", size):
        yield chunk({"content": piece})
    if step.get("kind") == "hang":
        return
    if step.get("kind") == "malformed":
        yield 'data: {"id": "' + cid + '", "choices": [{"delta": {"content": "x"\n\n'
        return
    calls = _tool_calls_of(step)
    for index, call in enumerate(calls):
        fn = call["function"]
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": ""},
                    }
                ]
            }
        )
        for piece in _pieces(fn["arguments"], 8):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, step.get("finish_reason") or ("tool_calls" if calls else "stop"))
    usage = _usage(step, prompt_tokens)
    if include_usage and usage is not None:
        data = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": usage,
        }
        yield f"data: {json.dumps(data)}\n\n"
    yield "data: [DONE]\n\n"


# --------------------------------------------------------------------------- remote control


class ScriptClient:
    """Scripts a server running in another process, by its base URL (with or without /v1)."""

    def __init__(self, url: str, timeout_s: float = 5.0) -> None:
        self.root = url.rstrip("/").removesuffix("/v1")
        self.timeout_s = timeout_s

    def script(
        self,
        steps: list[Step],
        *,
        model: str | None = None,
        then: Step | None = None,
        endpoint: str = "chat",
        append: bool = False,
    ) -> None:
        payload = {"steps": steps, "model": model, "then": then, "endpoint": endpoint, "append": append}
        httpx.post(f"{self.root}/_script", json=payload, timeout=self.timeout_s).raise_for_status()

    def requests(self, path: str | None = "/v1/chat/completions") -> list[dict[str, Any]]:
        resp = httpx.get(f"{self.root}/_requests", timeout=self.timeout_s)
        resp.raise_for_status()
        return [r for r in resp.json()["requests"] if path is None or r["path"] == path]

    def reset(self) -> None:
        httpx.post(f"{self.root}/_reset", timeout=self.timeout_s).raise_for_status()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted OpenAI-protocol server for tests")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", type=Path, help="JSON file: a list of steps, or {steps, model, then}")
    parser.add_argument("--api-key")
    parser.add_argument("--models", help="comma-separated: other models get a real 404")
    parser.add_argument("--context-tokens", type=int)
    args = parser.parse_args(argv)

    async def run() -> None:
        srv = OpenAIServer(
            host=args.host,
            port=args.port,
            api_key=args.api_key,
            models=args.models.split(",") if args.models else None,
            context_tokens=args.context_tokens,
        )
        if args.script:
            spec = json.loads(args.script.read_text())
            if isinstance(spec, list):
                spec = {"steps": spec}
            srv.script(spec.get("steps", []), model=spec.get("model"), then=spec.get("then"))
        await srv.start()
        print(f"READY {srv.url}", flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main(sys.argv[1:])
