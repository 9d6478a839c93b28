"""Per-model circuit breakers whose state is shared by every dispatcher replica.

closed → open after `failure_threshold` consecutive failures → after `cooldown_s` one caller
claims the half-open probe → its success closes the breaker, its failure opens it again.
A probe whose caller died is taken over after `probe_timeout_s`.

State lives in a `BreakerStore`: in memory (one process) or in the control KV bucket under
`breakers.<model>` with compare-and-set updates, so a trip seen by one replica holds for all.
Times are wall-clock seconds (they are compared across machines).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

from shared.aio import cancel_and_wait
from shared.bus.kv import kv_create, kv_get, kv_update
from shared.contract.control_keys import BREAKER_PREFIX
from shared.contract.models import BreakerState

if TYPE_CHECKING:
    from shared.bus import Bus

log = logging.getLogger("agentix.llm.breaker")
Change = Callable[[BreakerState], BreakerState | None]
Listener = Callable[[BreakerState], Awaitable[None] | None]
RECENT_FAILURES = 5
WATCH_RETRY_S = 1.0


class BreakerStore(Protocol):
    async def load(self, model: str) -> BreakerState: ...

    async def update(self, model: str, change: Change) -> tuple[BreakerState, bool]:
        """Atomically apply `change` to the current state (None = leave as is).
        Returns the resulting state and whether this call changed it."""
        ...


class MemoryBreakerStore:
    """One process: updates are atomic because they never await between read and write."""

    def __init__(self) -> None:
        self._states: dict[str, BreakerState] = {}

    async def load(self, model: str) -> BreakerState:
        return self._states.get(model) or BreakerState(model=model)

    async def update(self, model: str, change: Change) -> tuple[BreakerState, bool]:
        current = self._states.get(model) or BreakerState(model=model)
        new = change(current)
        if new is None:
            return current, False
        self._states[model] = new
        return new, True


def breaker_key(model: str) -> str:
    # KV keys allow [-/_=.a-zA-Z0-9]; model aliases are free text.
    return BREAKER_PREFIX + re.sub(r"[^-/_=a-zA-Z0-9]", "_", model)


@dataclass
class _Known:
    """What the watcher last saw of one breaker key: its state (None: no value, or deleted), the
    revision a compare-and-set must name (None: create it), and the newest revision seen."""

    state: BreakerState | None
    revision: int | None
    seen: int


class KVBreakerStore:
    """Breaker states in the control KV bucket (`breakers.<model>`), updated with CAS.

    Once `watch` runs, the store keeps what a KV watcher on `breakers.>` delivers: an admit or a
    success that changes nothing (every call of a healthy model) is answered from that copy with
    no KV read, and a change is a compare-and-set on the revision the copy holds, so a copy that
    is behind another replica's write makes the write fail and be decided again on a fresh read.
    Until a watcher has first delivered the current values, every call reads the KV as it did
    without one. After that the copy keeps answering while a watcher is started again (after a
    reconnect, or when an election of the bucket ended it): it is behind by at most that gap, and
    the compare-and-set above corrects it. Reading the KV instead held every model call for the
    bucket's request timeouts exactly when it had no leader — a reconnect is often a node's death,
    which the bucket's leader may have died with."""

    MAX_CAS_TRIES = 20

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self._kv: Any = None
        self._known: dict[str, _Known] = {}
        self._watching = False  # a watcher delivered every current value: the copy answers
        self._watch_task: asyncio.Task[None] | None = None

    async def _bucket(self) -> Any:
        if self._kv is None:
            self._kv = await self.bus.js.key_value(self.bus.names.control_bucket)
        return self._kv

    # -- the watched copy -------------------------------------------------------------------------
    async def watch(self) -> None:
        """Follow the breaker keys (the dispatcher does at start); a new watcher after every
        reconnect, as the control plane's (a server restart leaves the old one quiet)."""
        self._restart_watch()
        self.bus.on_reconnect(self._restart_watch_async)

    async def _restart_watch_async(self) -> None:
        self._restart_watch()

    def _restart_watch(self) -> None:
        if self._watch_task is not None:
            self._watch_task.cancel()
        self._watch_task = asyncio.create_task(self._watch_loop(), name="breaker-watch")

    async def stop(self) -> None:
        self._watching = False
        await cancel_and_wait(self._watch_task)

    async def _watch_loop(self) -> None:
        while True:
            try:
                # The bucket's handle is kept: looking it up again is a request to the bucket's
                # leader, which waited out its timeout while there was none.
                watcher = await (await self._bucket()).watch(BREAKER_PREFIX + ">")
                async for entry in watcher:
                    if entry is None:  # every current value has been delivered
                        self._watching = True
                        continue
                    self._saw(entry.key, entry.value if entry.operation in (None, "PUT") else None,
                              entry.revision or 0)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # an election ended it: the copy answers until a new one is caught up
                log.warning("breaker watcher stopped (%s); watching again", exc)
                await asyncio.sleep(WATCH_RETRY_S)

    def _saw(self, key: str, value: bytes | None, revision: int) -> None:
        known = self._known.get(key)
        if known is not None and revision <= known.seen:
            return  # older than what this store wrote or saw
        state = self._parse(value) if value else None
        self._known[key] = _Known(state, revision if state is not None else None, revision)

    @staticmethod
    def _parse(value: bytes) -> BreakerState | None:
        try:
            return BreakerState.model_validate_json(value)
        except ValueError:
            log.warning("unreadable breaker state %r; treating it as closed", value[:80])
            return None

    # -- reads and writes -------------------------------------------------------------------------
    async def _get(self, model: str, *, fresh: bool = False) -> tuple[BreakerState, int | None]:
        key = breaker_key(model)
        if self._watching and not fresh:
            known = self._known.get(key)
            if known is None or known.state is None:
                return BreakerState(model=model), known.revision if known is not None else None
            return known.state, known.revision
        kv = await self._bucket()
        try:
            entry = await kv_get(kv, key)  # through a leader election
        except KeyNotFoundError:  # includes a deleted key
            return BreakerState(model=model), None
        self._saw(key, entry.value, entry.revision or 0)
        if not entry.value:
            return BreakerState(model=model), entry.revision
        return (self._parse(entry.value) or BreakerState(model=model)), entry.revision

    async def load(self, model: str) -> BreakerState:
        return (await self._get(model))[0]

    async def update(self, model: str, change: Change) -> tuple[BreakerState, bool]:
        kv = await self._bucket()
        key = breaker_key(model)
        fresh = False
        for _ in range(self.MAX_CAS_TRIES):
            current, revision = await self._get(model, fresh=fresh)
            new = change(current)
            if new is None:
                return current, False
            data = new.model_dump_json(exclude_none=True).encode()
            try:
                # Retried through a leader election; a retry that finds its own write stored
                # counts as written (shared.bus.kv).
                if revision is None:
                    written = await kv_create(kv, key, data)
                else:
                    written = await kv_update(kv, key, data, last=revision)
            except KeyWrongLastSequenceError:
                fresh = True  # another replica wrote first (or the copy is behind): re-read, re-decide
                await asyncio.sleep(0)
                continue
            self._saw(key, data, written)
            return new, True
        raise RuntimeError(f"breaker state of {model!r} kept changing under us")


@dataclass(frozen=True)
class BreakerPolicy:
    failure_threshold: int = 5
    cooldown_s: float = 30.0
    probe_timeout_s: float = 120.0


Admission = Literal["closed", "probe"]


class CircuitBreakers:
    """The breaker logic over a store. `listeners` are called on every state transition (for
    events and logs); `states()` gives the current states for heartbeats."""

    def __init__(
        self,
        store: BreakerStore | None = None,
        policy: BreakerPolicy | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store: BreakerStore = store or MemoryBreakerStore()
        self.policy = policy or BreakerPolicy()
        self.clock = clock
        self.listeners: list[Listener] = []
        self.known: set[str] = set()

    async def admit(self, model: str) -> Admission | None:
        """May a call go to `model`? "closed": yes; "probe": yes, as the single half-open
        probe; None: no (open, or another caller is probing)."""
        self.known.add(model)
        now = self.clock()
        p = self.policy

        def change(s: BreakerState) -> BreakerState | None:
            since = s.opened_at or 0.0
            if s.state == "open" and now - since >= p.cooldown_s:
                return s.model_copy(update={"state": "half_open", "opened_at": now})
            if s.state == "half_open" and now - since >= p.probe_timeout_s:
                return s.model_copy(update={"opened_at": now})  # the last probe never reported
            return None

        updated = await self._update(model, change, "admit a call")
        if updated is None:
            return "closed"  # the shared state cannot be read now: the call goes ahead
        state, changed = updated
        if state.state == "closed":
            return "closed"
        if changed and state.state == "half_open":
            await self._notify(state)
            return "probe"
        return None

    async def success(self, model: str) -> None:
        before: list[BreakerState] = []

        def change(s: BreakerState) -> BreakerState | None:
            before[:] = [s]
            if s.state == "closed" and s.failures == 0:
                return None
            return s.model_copy(update={"state": "closed", "failures": 0, "opened_at": None})

        updated = await self._update(model, change, "record a success")
        if updated is None:
            return
        state, changed = updated
        if changed and before[0].state != "closed":
            log.info("circuit breaker of %s is closed again", model)
            await self._notify(state)

    async def failure(self, model: str, code: str, message: str) -> tuple[BreakerState, bool]:
        """Record a failure. Returns the new state and whether this failure changed the state
        (closed/half-open → open: the caller's task can say that it tripped the breaker)."""
        now = self.clock()
        p = self.policy
        entry = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(now))} {code}: {message}"[:300]

        before: list[BreakerState] = []

        def change(s: BreakerState) -> BreakerState:
            before[:] = [s]
            failures = s.failures + 1
            state, opened_at = s.state, s.opened_at
            if s.state == "half_open" or (s.state == "closed" and failures >= p.failure_threshold):
                state, opened_at = "open", now
            return s.model_copy(
                update={
                    "state": state,
                    "failures": failures,
                    "opened_at": opened_at,
                    "last_error": f"{code}: {message}",
                    "recent_failures": [*s.recent_failures, entry][-RECENT_FAILURES:],
                }
            )

        updated = await self._update(model, change, "record a failure")
        if updated is None:
            return BreakerState(model=model), False
        state, _ = updated
        transition = state.state != before[0].state
        if transition:
            log.warning("circuit breaker of %s is now %s (%s)", model, state.state, message)
            await self._notify(state)
        return state, transition

    async def release_probe(self, model: str) -> None:
        """The probe ended without a verdict (cancelled, budget): let the next caller probe."""
        now = self.clock()
        cooldown = self.policy.cooldown_s

        def change(s: BreakerState) -> BreakerState | None:
            if s.state != "half_open":
                return None
            return s.model_copy(update={"state": "open", "opened_at": now - cooldown})

        await self._update(model, change, "release a probe")

    async def _update(self, model: str, change: Change, what: str) -> tuple[BreakerState, bool] | None:
        """`store.update`, or None when the shared state cannot be read or written now (a leader
        election of the control bucket, a reconnect). A breaker's bookkeeping must never fail the
        call it is about: an error raised after a model answered turned that answer into a failed
        node, and the task's redelivery asked the model a second time."""
        try:
            return await self.store.update(model, change)
        except Exception as exc:
            log.warning("circuit breaker of %s: could not %s (%s: %s)", model, what, type(exc).__name__, exc)
            return None

    async def states(self, models: list[str] | None = None) -> list[BreakerState]:
        names = sorted(set(models or []) | self.known)
        return [await self.store.load(m) for m in names]

    async def _notify(self, state: BreakerState) -> None:
        for listener in list(self.listeners):
            try:
                result = listener(state)
                if asyncio.iscoroutine(result):
                    await result
            except Exception:
                log.exception("breaker listener failed")
