"""Circuit breakers through the pool against the scripted server, in memory and in the control
KV bucket shared by two bus connections (= two dispatcher replicas)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from nats.js.kv import KeyValue

from services.dispatcher.llm import breaker as breaker_module
from services.dispatcher.llm.api import LLMRequest
from services.dispatcher.llm.breaker import BreakerPolicy, CircuitBreakers, KVBreakerStore, breaker_key
from services.dispatcher.llm.chain_config import ModelControl
from services.dispatcher.llm.pool import ModelPool
from services.dispatcher.llm.retry import RetryPolicy
from shared.bus import Bus
from shared.contract.models import BreakerState, ModelChain, ModelConfig
from shared.settings import Settings
from tests.support import openai_server as oai
from tests.support.wait import eventually

MESSAGES = [{"role": "user", "content": "hi"}]
POLICY = BreakerPolicy(failure_threshold=3, cooldown_s=10.0, probe_timeout_s=60.0)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make_pool(settings: Settings, url: str, clock: Clock, **kw: object) -> ModelPool:
    models = {n: ModelConfig(id=n, name=n, base_url=url, model=f"{n}-m") for n in ("primary", "fallback")}
    chain = ModelChain(revision=1, active="primary", fallbacks=["fallback"], models=models)

    async def no_wait(_: float) -> None:
        await asyncio.sleep(0)

    pool = ModelPool(
        settings,
        control=ModelControl(settings, chain=chain),
        breaker_policy=POLICY,
        retry=RetryPolicy(attempts=1),
        sleep=no_wait,
        **kw,
    )  # type: ignore[arg-type]
    pool.breakers.clock = clock
    return pool


def primary_calls(server: oai.OpenAIServer) -> int:
    return sum(1 for r in server.requests() if r["model"] == "primary-m")


async def test_breaker_opens_after_n_and_recovers_through_half_open(srv: oai.OpenAIServer, tmp_path: Path) -> None:
    clock = Clock()
    pool = make_pool(Settings(data_dir=tmp_path), srv.url, clock)
    transitions: list[str] = []
    pool.breakers.listeners.append(lambda s: transitions.append(s.state))
    srv.script([oai.server_error(500)] * 3, model="primary-m")
    for _ in range(3):  # each call fails over to the fallback while the primary fails
        assert (await pool.pinned().complete(LLMRequest(messages=MESSAGES))).model == "fallback"
    assert transitions == ["open"]
    # Open: the primary is not even asked.
    assert (await pool.pinned().complete(LLMRequest(messages=MESSAGES))).model == "fallback"
    assert primary_calls(srv) == 3
    # After the cooldown one probe goes to the primary; its failure opens the breaker again.
    clock.now += 10
    srv.script([oai.server_error(500)], model="primary-m")
    assert (await pool.pinned().complete(LLMRequest(messages=MESSAGES))).model == "fallback"
    assert primary_calls(srv) == 4 and transitions == ["open", "half_open", "open"]
    assert (await pool.pinned().complete(LLMRequest(messages=MESSAGES))).model == "fallback"
    assert primary_calls(srv) == 4
    # Next cooldown: the probe succeeds and the breaker closes.
    clock.now += 10
    assert (await pool.pinned().complete(LLMRequest(messages=MESSAGES))).model == "primary"
    assert transitions == ["open", "half_open", "open", "half_open", "closed"]
    state = {s.model: s for s in await pool.breaker_states()}["primary"]
    assert state.state == "closed" and state.failures == 0 and len(state.recent_failures) == 4
    await pool.aclose()


class UnreachableStore:
    """The breaker states' bucket during a leader election: every read and write times out."""

    async def load(self, model: str) -> BreakerState:
        raise TimeoutError("nats: timeout")

    async def update(self, model: str, change: object) -> tuple[BreakerState, bool]:
        raise TimeoutError("nats: timeout")


async def test_an_answer_stands_when_its_breaker_cannot_be_recorded(
        srv: oai.OpenAIServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    pool = make_pool(Settings(data_dir=tmp_path), srv.url, Clock())
    pool.breakers.store = UnreachableStore()
    # A call goes ahead (the state cannot be read) and its answer is kept (the success cannot be
    # written): the model is asked once. A failure is still the call's own error.
    assert (await pool.pinned().complete(LLMRequest(messages=MESSAGES))).model == "primary"
    assert primary_calls(srv) == 1
    srv.script([oai.server_error(500)], model="primary-m")
    assert (await pool.pinned().complete(LLMRequest(messages=MESSAGES))).model == "fallback"
    assert "could not record a success" in caplog.text and "could not record a failure" in caplog.text
    await pool.aclose()


async def test_half_open_admits_a_single_probe(tmp_path: Path) -> None:
    clock = Clock()
    breakers = CircuitBreakers(policy=POLICY, clock=clock)
    for _ in range(3):
        await breakers.failure("m", "timeout", "slow")
    assert await breakers.admit("m") is None
    clock.now += 10
    assert await breakers.admit("m") == "probe"
    assert await breakers.admit("m") is None  # someone else is probing
    await breakers.release_probe("m")  # the probe was cancelled without a verdict
    assert await breakers.admit("m") == "probe"
    clock.now += POLICY.probe_timeout_s  # that probe never reported: taken over
    assert await breakers.admit("m") == "probe"


async def test_a_trip_in_kv_is_honoured_by_another_replica(srv: oai.OpenAIServer, bus: Bus, settings: Settings) -> None:
    clock = Clock()
    other_bus = await Bus.connect(settings, name="replica-b")
    pool_a = make_pool(settings, srv.url, clock, breaker_store=KVBreakerStore(bus))
    pool_b = make_pool(settings, srv.url, clock, breaker_store=KVBreakerStore(other_bus))
    try:
        srv.script([oai.server_error(503)] * 3, model="primary-m")
        for _ in range(3):
            assert (await pool_a.pinned().complete(LLMRequest(messages=MESSAGES))).model == "fallback"
        kv = await other_bus.js.key_value(other_bus.names.control_bucket)
        stored = BreakerState.model_validate_json((await kv.get(breaker_key("primary"))).value)
        assert stored.state == "open" and stored.failures == 3 and "503" in (stored.last_error or "")
        # Replica B never saw a failure itself, yet skips the primary.
        assert (await pool_b.pinned().complete(LLMRequest(messages=MESSAGES))).model == "fallback"
        assert primary_calls(srv) == 3
        assert {s.model: s.state for s in await pool_b.breaker_states()}["primary"] == "open"
        # B's successful probe closes it for A too.
        clock.now += 10
        assert (await pool_b.pinned().complete(LLMRequest(messages=MESSAGES))).model == "primary"
        assert (await pool_a.pinned().complete(LLMRequest(messages=MESSAGES))).model == "primary"
        assert json.loads((await kv.get(breaker_key("primary"))).value)["state"] == "closed"
    finally:
        await pool_a.aclose()
        await pool_b.aclose()
        await other_bus.close()


async def test_kv_updates_are_atomic_across_replicas(bus: Bus, settings: Settings) -> None:
    other_bus = await Bus.connect(settings, name="replica-b")
    try:
        big = BreakerPolicy(failure_threshold=1000)
        a = CircuitBreakers(KVBreakerStore(bus), big)
        b = CircuitBreakers(KVBreakerStore(other_bus), big)
        await asyncio.gather(*[(a if i % 2 else b).failure("m x/1", "timeout", f"#{i}") for i in range(20)])
        state = await a.store.load("m x/1")
        assert state.failures == 20 and state.model == "m x/1"
    finally:
        await other_bus.close()


async def watched(bus: Bus) -> KVBreakerStore:
    """A store following the breaker keys, as a dispatcher's does, once it holds every current value."""
    store = KVBreakerStore(bus)
    await store.watch()
    await eventually(lambda: _ready(store))
    return store


async def _ready(store: KVBreakerStore) -> bool:
    return store._watching


async def test_a_watched_store_answers_a_healthy_model_without_reading_the_kv(
    srv: oai.OpenAIServer, bus: Bus, settings: Settings, monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[str] = []
    real_get = breaker_module.kv_get

    async def counted(kv: object, key: str) -> object:
        reads.append(key)
        return await real_get(kv, key)  # type: ignore[arg-type]

    monkeypatch.setattr(breaker_module, "kv_get", counted)
    pool = make_pool(settings, srv.url, Clock(), breaker_store=await watched(bus))
    try:
        for _ in range(5):
            assert (await pool.pinned().complete(LLMRequest(messages=MESSAGES))).model == "primary"
        assert reads == []  # ten breaker checks (an admit and a success per call), no KV read
    finally:
        await pool.aclose()


async def test_after_a_reconnect_the_copy_answers_while_the_bucket_cannot_be_watched(
    srv: oai.OpenAIServer, bus: Bus, settings: Settings, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reconnect starts a new watcher; while it cannot start (the bucket has no leader: its
    requests wait out their timeouts, here forever), model calls are answered from the copy —
    no KV read and no lookup of the bucket, each of which waited out a timeout per call."""
    store = await watched(bus)
    watcher = store._watch_task
    reads: list[str] = []
    lookups: list[str] = []
    real_get, real_lookup = breaker_module.kv_get, bus.js.key_value
    no_leader = asyncio.Event()  # never set

    async def counted_get(kv: object, key: str) -> object:
        reads.append(key)
        return await real_get(kv, key)  # type: ignore[arg-type]

    async def counted_lookup(bucket: str) -> object:
        lookups.append(bucket)
        return await real_lookup(bucket)

    async def leaderless_watch(self: object, *args: object, **kwargs: object) -> object:
        await no_leader.wait()
        raise AssertionError("unreachable")

    monkeypatch.setattr(breaker_module, "kv_get", counted_get)
    monkeypatch.setattr(bus.js, "key_value", counted_lookup)
    monkeypatch.setattr(KeyValue, "watch", leaderless_watch)
    await bus.nc.force_reconnect()
    await eventually(lambda: _restarted(store, watcher))
    pool = make_pool(settings, srv.url, Clock(), breaker_store=store)
    try:
        for _ in range(3):
            assert (await pool.pinned().complete(LLMRequest(messages=MESSAGES))).model == "primary"
        assert reads == [] and lookups == []
    finally:
        await pool.aclose()
        await store.stop()


async def _restarted(store: KVBreakerStore, before: asyncio.Task[None] | None) -> bool:
    return store._watch_task is not before


async def test_a_trip_reaches_a_watching_replica_and_a_write_from_a_copy_behind_is_decided_again(
    srv: oai.OpenAIServer, bus: Bus, settings: Settings,
) -> None:
    clock = Clock()
    other_bus = await Bus.connect(settings, name="replica-b")
    store_b = await watched(other_bus)
    pool_a = make_pool(settings, srv.url, clock, breaker_store=KVBreakerStore(bus))
    pool_b = make_pool(settings, srv.url, clock, breaker_store=store_b)
    try:
        srv.script([oai.server_error(503)] * 3, model="primary-m")
        for _ in range(3):
            assert (await pool_a.pinned().complete(LLMRequest(messages=MESSAGES))).model == "fallback"

        async def b_sees_it_open() -> bool:
            return (await store_b.load("primary")).state == "open"

        await eventually(b_sees_it_open)  # the watcher delivered A's trip: B skips the primary
        assert (await pool_b.pinned().complete(LLMRequest(messages=MESSAGES))).model == "fallback"
        assert primary_calls(srv) == 3
        # A probes and closes it after the cooldown, and B's copy is made to lag behind that: B's
        # own probe claim, a CAS on the revision its copy holds, is refused, and B decides again
        # on what the KV holds (closed).
        opened = store_b._known[breaker_key("primary")]
        clock.now += 10
        assert (await pool_a.pinned().complete(LLMRequest(messages=MESSAGES))).model == "primary"
        await eventually(lambda: _closed_in(store_b))
        store_b._known[breaker_key("primary")] = opened
        assert (await pool_b.pinned().complete(LLMRequest(messages=MESSAGES))).model == "primary"
        kv = await bus.js.key_value(bus.names.control_bucket)
        assert json.loads((await kv.get(breaker_key("primary"))).value)["state"] == "closed"
    finally:
        await pool_a.aclose()
        await pool_b.aclose()
        await other_bus.close()


async def _closed_in(store: KVBreakerStore) -> bool:
    return (await store.load("primary")).state == "closed"


async def test_watched_kv_updates_are_atomic_across_replicas(bus: Bus, settings: Settings) -> None:
    other_bus = await Bus.connect(settings, name="replica-b")
    try:
        big = BreakerPolicy(failure_threshold=1000)
        a = CircuitBreakers(await watched(bus), big)
        b = CircuitBreakers(await watched(other_bus), big)
        await asyncio.gather(*[(a if i % 2 else b).failure("m y/1", "timeout", f"#{i}") for i in range(20)])
        kv = await bus.js.key_value(bus.names.control_bucket)
        state = BreakerState.model_validate_json((await kv.get(breaker_key("m y/1"))).value)
        assert state.failures == 20 and state.model == "m y/1"
        for store in (a.store, b.store):
            assert isinstance(store, KVBreakerStore)
            await store.stop()
    finally:
        await other_bus.close()
