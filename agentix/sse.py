"""A small SSE client over httpx that resumes with Last-Event-ID when the connection drops."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class SseEvent:
    id: str | None
    event: str
    data: dict[str, Any]


def parse_stream(lines: Iterator[str]) -> Iterator[SseEvent]:
    event_id: str | None = None
    name = "message"
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield SseEvent(event_id, name, json.loads("\n".join(data)))
            name, data = "message", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "id":
            event_id = value
        elif field == "event":
            name = value
        elif field == "data":
            data.append(value)


def follow(client: httpx.Client, url: str, headers: dict[str, str], retries: int = 30,
           after: str | None = None) -> Iterator[SseEvent]:
    """Yield events (those after the id `after`, when given) until the server ends the stream
    after `done`; reconnect on errors."""
    last_id = after
    failures = 0
    while True:
        hdrs = dict(headers)
        if last_id:
            hdrs["Last-Event-ID"] = last_id
        try:
            with client.stream("GET", url, headers=hdrs, timeout=httpx.Timeout(10, read=60)) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    raise SystemExit(f"stream failed: HTTP {resp.status_code} {resp.text}")
                for ev in parse_stream(resp.iter_lines()):
                    failures = 0
                    last_id = ev.id or last_id
                    yield ev
                    if ev.event == "done":
                        return
            return
        except (httpx.TransportError, httpx.RemoteProtocolError):
            failures += 1
            if failures > retries:
                raise
            time.sleep(min(2.0, 0.2 * failures))
