"""Server-to-client MCP notifications and the GET stream that carries them.

A change (a workflow saved, edited or deleted) is published, by whichever gateway replica made
it, to the stream `P_MCP` on `P.mcp.events.user.<user key>` as the JSON-RPC notification itself.
A session's `GET /mcp` — on any replica — is an ordered consumer of its user's subject and its
own (`P.mcp.events.session.<id>`); each SSE event's id is the message's stream sequence, so a
client that reconnects with `Last-Event-ID` (to this replica or another) gets exactly what it
missed, for as long as the stream keeps it (`MCP_EVENTS_MAX_AGE_S`).

`notifications/resources/updated` goes to the sessions subscribed to its URI: the filter reads
the session's record when such a notification comes, so a subscription made on another replica
counts from the moment it was stored."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from nats.js.api import ConsumerConfig, DeliverPolicy
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.types import Receive, Scope, Send

from services.gateway.protocols.mcp.sessions import McpSessionRecord, McpSessions, dumps, user_key
from shared.bus.client import Bus
from shared.bus.events import reader_js
from shared.bus.retry import with_retries

log = logging.getLogger(__name__)
URI_HEADER = "Agentix-Mcp-Uri"  # on a `resources/updated`: the subscription it is for
IDLE_CHECK_S = 30.0  # how often an idle stream checks that its session still exists
WORKFLOW_URI = "agentix://workflows/{id}"


async def publish(bus: Bus, user_id: str, method: str, params: dict[str, Any] | None = None,
                  uri: str | None = None) -> None:  # fmt: skip
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    headers = {URI_HEADER: uri} if uri is not None else None
    await bus.js_publish_raw(bus.subjects.mcp_events("user", user_key(user_id)), dumps(message), headers=headers)


async def workflow_changed(bus: Bus | None, user_id: str, workflow_id: str, listing: bool) -> None:
    """A workflow was saved (`listing`: created or deleted, so the tool list changed too).
    Never fails the change itself: a bus that cannot take it loses the notification, logged."""
    if bus is None:
        return
    uri = WORKFLOW_URI.format(id=workflow_id)
    try:
        if listing:
            await publish(bus, user_id, "notifications/tools/list_changed")
            await publish(bus, user_id, "notifications/resources/list_changed")
        await publish(bus, user_id, "notifications/resources/updated", {"uri": uri}, uri=uri)
    except Exception:
        log.warning("MCP change notification for %s not published", uri, exc_info=True)


def start_after(record: McpSessionRecord, last_event_id: str | None) -> int | None:
    """The stream sequence a GET stream resumes after; None: `Last-Event-ID` is not one of ours."""
    if not last_event_id:
        return record.since
    return int(last_event_id) if last_event_id.isdigit() else None


async def _events(bus: Bus, sessions: McpSessions, session_id: str, record: McpSessionRecord,
                  after: int) -> AsyncIterator[ServerSentEvent]:  # fmt: skip
    subjects = [bus.subjects.mcp_events("user", user_key(record.user_id)),
                bus.subjects.mcp_events("session", session_id)]
    # Priming event (an id, no data): the client has a point to resume from before anything came.
    yield ServerSentEvent(id=str(after), event="message", data="")

    def config() -> ConsumerConfig:
        return ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=after + 1,
                              filter_subjects=subjects)  # fmt: skip

    sub = await with_retries(lambda: reader_js(bus).subscribe(
        subjects[0], ordered_consumer=True, idle_heartbeat=5.0, config=config(), stream=bus.names.mcp_stream,
    ), what=f"the notifications of MCP session {session_id}")  # fmt: skip
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=IDLE_CHECK_S)
            except TimeoutError:
                if await sessions.get(session_id) is None:
                    return  # ended (DELETE) or expired: the stream ends with it
                continue
            uri = (msg.headers or {}).get(URI_HEADER)
            if uri is not None:
                found = await sessions.get(session_id)
                if found is None:
                    return
                if uri not in found[0].subscriptions:
                    continue
            yield ServerSentEvent(id=str(msg.metadata.sequence.stream), event="message",
                                  data=json.dumps(json.loads(msg.data), separators=(",", ":")))  # fmt: skip
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()


async def serve_stream(bus: Bus, sessions: McpSessions, session_id: str, record: McpSessionRecord, after: int,
                       scope: Scope, receive: Receive, send: Send) -> None:  # fmt: skip
    """The session's GET stream, as SSE, until the client goes or the session ends."""
    headers = {"Mcp-Session-Id": session_id, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    response = EventSourceResponse(_events(bus, sessions, session_id, record, after), headers=headers, ping=15)
    await response(scope, receive, send)
