"""One service instance's life on the bus, the same for all four services.

`ServiceHost` connects to NATS and declares the streams and buckets — waiting for a NATS that
does not answer yet and through a cluster that is still forming, with where it is in that kept
in `startup` (`shared/startup.py`) — heartbeats, answers health with what is really going on,
and stops in one order:

1. drain — stop taking work, finish or hand back what is in flight (newest step first);
2. leave the bus — no more health answers or heartbeats;
3. release — the service's own resources (newest first), then the NATS connection.

Health keeps answering during the drain, saying so (`lifecycle.state` is `draining`): draining
is a normal state, not a failure, so it does not make the answer `ok: false`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, TypeVar

from nats.aio.subscription import Subscription

from shared.aio import cancel_and_wait
from shared.bus.client import Bus
from shared.bus.heartbeat import Checks, Heartbeater, new_instance_id, serve_health
from shared.contract.heartbeat import Load
from shared.runtime import settle_heap
from shared.settings import CommonSettings
from shared.startup import Startup, StoppedWhileStarting

log = logging.getLogger("agentix.service_host")

Step = Callable[[], Awaitable[Any] | None]  # a coroutine function, or a plain one (`db.close`)
T = TypeVar("T")


class ServiceHost:
    """One service instance on the bus. Use as `async with ServiceHost(...) as host:`, register
    what to report, check, drain and release, then `await host.serve_until(stop)`; leaving the
    block (normally or by an error while setting up) stops the instance in the order above."""

    def __init__(self, settings: CommonSettings, service: str, *, instance: str | None = None,
                 stop: asyncio.Event | None = None) -> None:
        """`stop`: the service's stop event; set while the host is still starting (waiting for
        NATS, say), it ends the start at once (`StoppedWhileStarting`): nothing was taken yet."""
        self.settings = settings
        self._stop = stop
        self.service = service
        self.instance = instance or new_instance_id(service)
        self.draining = False
        self.startup = Startup()
        self._bus: Bus | None = None
        self._load: Callable[[], Load] | None = None
        self._detail: Callable[[], dict[str, Any]] | None = None
        self._checks: list[tuple[str, Checks]] = []
        self._drain_steps: list[tuple[str, Step]] = []
        self._release_steps: list[tuple[str, Step]] = []
        self._heartbeat: Heartbeater | None = None
        self._health: Subscription | None = None

    @property
    def bus(self) -> Bus:
        if self._bus is None:
            raise RuntimeError(f"{self.service}: the service host is not started")
        return self._bus

    async def start(self) -> Bus:
        """Connect to NATS (waiting for it as long as it takes) and declare every stream,
        consumer and bucket (waiting through a forming cluster up to `declare_timeout_s`). A
        failure is recorded in `startup` and raised (a `BusDeclareError` says what and why)."""
        started = time.monotonic()
        try:
            self.startup.enter("connecting")
            bus = await self._unless_stopped(
                Bus.connect_waiting(self.settings, name=self.service, on_wait=self.startup.waiting))
            try:
                self.startup.enter("declaring")
                await self._unless_stopped(bus.declare(on_wait=self.startup.waiting))
            except BaseException:
                await bus.close()
                raise
        except StoppedWhileStarting:
            raise
        except Exception as exc:
            self.startup.fail(exc)
            raise
        self.startup.enter("wiring")
        log.info("%s %s: on the bus in %.1f s", self.service, self.instance, time.monotonic() - started)
        self._bus = bus
        return bus

    async def _unless_stopped(self, step: Coroutine[Any, Any, T]) -> T:
        """`await step`, unless the stop event is set first (then the step is cancelled)."""
        if self._stop is None:
            return await step
        task = asyncio.ensure_future(step)
        stopped = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not task.done():  # stopped, or this start itself cancelled
                await cancel_and_wait(task)
        if task.cancelled():
            raise StoppedWhileStarting(f"{self.service} was stopped while {self.startup.describe()}")
        return task.result()

    async def __aenter__(self) -> ServiceHost:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:  # fmt: skip
        await self.stop()

    # -- what the service registers -----------------------------------------------------------------
    def reports(self, *, load: Callable[[], Load] | None = None,
                detail: Callable[[], dict[str, Any]] | None = None) -> None:  # fmt: skip
        """What each heartbeat carries: the load and a free-form detail (read synchronously)."""
        self._load, self._detail = load, detail

    def checks(self, name: str, checks: Checks) -> None:
        """Named checks added to the health answer (a failing `checks` is reported under `name`).
        A check named `nats` replaces the host's own connection check."""
        self._checks.append((name, checks))

    def on_drain(self, name: str, step: Step) -> None:
        """Stop taking work and finish or hand back what is in flight; steps run newest first."""
        self._drain_steps.append((name, step))

    def on_release(self, name: str, step: Step) -> None:
        """Release a resource once the instance has left the bus; steps run newest first."""
        self._release_steps.append((name, step))

    # -- life ---------------------------------------------------------------------------------------
    async def serve(self) -> None:
        """Answer health, then heartbeat: the instance is now visible. In this order, because the
        server handles one connection's messages in order: whoever sees a heartbeat can ask for
        health and be answered."""
        bus = self.bus
        settle_heap()  # the service is set up: what it holds now lives as long as the process
        self._health = await serve_health(bus, self.service, self.instance, self.health)
        self._heartbeat = Heartbeater(bus, self.service, self.instance, load=self._load, detail=self._detail)
        self._heartbeat.start()
        self.startup.served()

    async def serve_until(self, stop: asyncio.Event) -> None:
        await self.serve()
        log.info("%s %s running", self.service, self.instance)
        await stop.wait()

    async def health(self) -> dict[str, Any]:
        """The health answer's checks: the connection, each registered set, and the lifecycle."""
        result: dict[str, Any] = {"nats": {"ok": self._bus is not None and self._bus.connected}}
        answers = await asyncio.gather(*(checks() for _, checks in self._checks), return_exceptions=True)
        for (name, _), answer in zip(self._checks, answers, strict=True):
            if isinstance(answer, BaseException):
                result[name] = {"ok": False, "error": f"{type(answer).__name__}: {answer}"}
            else:
                result.update(answer)
        result["lifecycle"] = {"ok": True, "state": "draining" if self.draining else "serving"}
        return result

    async def stop(self) -> None:
        """Drain, leave the bus, release. Each step runs even when an earlier one failed."""
        self.draining = True
        if self._drain_steps:
            log.info("%s %s draining", self.service, self.instance)
        for name, step in reversed(self._drain_steps):
            await self._run_step("draining", name, step)
        if self._health is not None:
            await self._run_step("leaving the bus", "health", self._health.unsubscribe)
        if self._heartbeat is not None:
            await self._run_step("leaving the bus", "heartbeat", self._heartbeat.stop)
        for name, step in reversed(self._release_steps):
            await self._run_step("releasing", name, step)
        if self._bus is not None:
            await self._run_step("releasing", "nats", self._bus.close)
        self._drain_steps.clear()
        self._release_steps.clear()
        self._health = self._heartbeat = None

    async def _run_step(self, phase: str, name: str, step: Step) -> None:
        try:
            result = step()
            if inspect.isawaitable(result):
                await result
        except Exception:
            # One failing step must not leave the rest undone (the process is going away).
            log.exception("%s %s: %s %s failed", self.service, self.instance, phase, name)
