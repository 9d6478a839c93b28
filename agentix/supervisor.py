"""Keep child processes running: restart one that exits, with backoff; give up on a crash loop;
stop them all in tiers (SIGTERM so they drain, SIGKILL after a deadline). `agentix up` runs NATS
and the services under one `Supervisor`."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from agentix.supervision_state import ProcessState, write_state
from shared.backoff import Backoff

TAIL_LINES = 20
# How long to wait for the rest of a dead child's output: a grandchild that inherited the pipe
# could hold it open for ever.
PUMP_DRAIN_S = 2.0


@dataclass(frozen=True)
class RestartPolicy:
    """Backoff doubles from `first_delay_s` to `max_delay_s` and starts over once a process has
    stayed up `stable_after_s`; `crash_loop_exits` exits within `crash_loop_window_s` mean it
    will not come up by itself, and waiting longer would only hide that."""

    first_delay_s: float = 0.5
    max_delay_s: float = 10.0
    stable_after_s: float = 30.0
    crash_loop_exits: int = 5
    crash_loop_window_s: float = 60.0

    @property
    def backoff(self) -> Backoff:
        return Backoff(self.first_delay_s, self.max_delay_s)


@dataclass
class ChildSpec:
    """What to run. `tier` orders the stop: higher tiers stop first (services before NATS, which
    they need to drain). Output goes to the terminal with a prefix, or to `log_file`."""

    name: str
    argv: list[str]
    env: dict[str, str]
    tier: int = 1
    log_file: Path | None = None
    kind: str = "service"


@dataclass
class Child:
    spec: ChildSpec
    proc: subprocess.Popen[bytes] | None = None
    pump: threading.Thread | None = None
    started_at: float = 0.0  # monotonic, for backoff and crash-loop arithmetic
    started_wall: float = 0.0  # wall clock, for the state file
    state: str = "starting"
    restarts: int = 0
    quick_exits: int = 0  # exits in a row, each before the process had stayed up `stable_after_s`
    last_exit: str | None = None
    last_exit_wall: float | None = None
    exits: deque[float] = field(default_factory=deque)
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    retiring: bool = False  # stopped on purpose by `stop_one`: its exit is neither a crash nor restarted

    def snapshot(self) -> ProcessState:
        pid = self.proc.pid if self.proc is not None and self.proc.poll() is None else None
        return ProcessState(name=self.spec.name, kind=self.spec.kind, pid=pid,
                            state=self.state, restarts=self.restarts, since=self.started_wall,
                            last_exit=self.last_exit, last_exit_at=self.last_exit_wall)


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


class Supervisor:
    """Runs each child under a watcher thread. With `restart=False` (the test harness) the first
    exit is final and reported by `failure`, like a crash loop."""

    def __init__(self, policy: RestartPolicy | None = None, state_file: Path | None = None,
                 restart: bool = True, say: Callable[[str], None] | None = None) -> None:
        self.policy = policy or RestartPolicy()
        self.state_file = state_file
        self.restart = restart
        self.children: list[Child] = []
        self.failure: str | None = None
        self.failed_child: str | None = None
        self.failed = threading.Event()  # set together with `failure`
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # guards children's processes and state, and the state file
        self._out_lock = threading.Lock()  # one writer on the terminal at a time
        self._say = say or self._print

    # -- starting -----------------------------------------------------------------------------
    def start(self, spec: ChildSpec) -> subprocess.Popen[bytes]:
        child = Child(spec)
        with self._lock:
            self.children.append(child)
            self._spawn(child)
        threading.Thread(target=self._watch, args=(child,), name=f"watch-{spec.name}", daemon=True).start()
        assert child.proc is not None
        return child.proc

    def _spawn(self, child: Child) -> None:
        """Start the child's process (caller holds the lock)."""
        child.proc = subprocess.Popen(
            child.spec.argv, env=child.spec.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches only `up`, which stops the children in order
        )
        child.started_at, child.started_wall = time.monotonic(), time.time()
        child.state = "running"
        child.pump = threading.Thread(target=self._pump, args=(child, child.proc), daemon=True)
        child.pump.start()
        self._save()

    # -- watching -----------------------------------------------------------------------------
    def _watch(self, child: Child) -> None:
        while True:
            proc = child.proc
            assert proc is not None
            code = proc.wait()
            # Its last lines first: they explain the exit, and a crash loop quotes them.
            if child.pump is not None:
                child.pump.join(PUMP_DRAIN_S)
            with self._lock:
                if self._stopping.is_set() or child.retiring:
                    child.state = "stopped"
                    self._save()
                    return
                uptime = self._record_exit(child, code)
                if not self.restart:
                    self._fail(child, f"{child.spec.name} exited with {child.last_exit}")
                    return
                if len(child.exits) >= self.policy.crash_loop_exits:
                    self._fail(child, f"{child.spec.name} is crash-looping: {len(child.exits)} exits within "
                                      f"{self.policy.crash_loop_window_s:g} s, the last with {child.last_exit}")
                    return
                delay = self._next_delay(child, uptime)
                child.state = "restarting"
                self._save()
            self._say(f"{child.spec.name} exited with {child.last_exit} after {uptime:.1f} s; "
                      f"restarting in {delay:g} s (restart #{child.restarts + 1})")
            if self._stopping.wait(delay):
                return
            with self._lock:
                if self._stopping.is_set():
                    return
                child.restarts += 1
                try:
                    self._spawn(child)
                except OSError as exc:
                    self._fail(child, f"{child.spec.name} could not be restarted: {exc}")
                    return

    def stop_one(self, name: str, timeout_s: float = 30.0) -> int:
        """Stop the running child `name` with SIGTERM and forget it (a replacement is started with
        `start`); returns its exit code."""
        with self._lock:
            child = next(c for c in self.children if c.spec.name == name and c.state == "running")
            child.retiring = True
            proc = child.proc
        assert proc is not None
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout_s)
        with self._lock:
            self.children.remove(child)
            self._save()
        return code

    def _record_exit(self, child: Child, code: int) -> float:
        now = time.monotonic()
        child.last_exit, child.last_exit_wall = describe_exit(code), time.time()
        child.exits.append(now)
        while child.exits and now - child.exits[0] > self.policy.crash_loop_window_s:
            child.exits.popleft()
        return now - child.started_at

    def _next_delay(self, child: Child, uptime: float) -> float:
        if uptime >= self.policy.stable_after_s:
            child.quick_exits = 0
        delay = self.policy.backoff.delay(child.quick_exits)
        child.quick_exits += 1
        return delay

    def _fail(self, child: Child, why: str) -> None:
        """Give up on `child` (caller holds the lock): keep the first reason, wake `up`."""
        child.state = "crash-loop" if self.restart else "exited"
        self._save()
        if self.failure is None:
            self.failure, self.failed_child = why, child.spec.name
        self.failed.set()

    def last_lines(self, name: str) -> list[str]:
        child = next((c for c in self.children if c.spec.name == name), None)
        return list(child.tail) if child else []

    # -- output -------------------------------------------------------------------------------
    def _pump(self, child: Child, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        sink: IO[bytes] | None = open(child.spec.log_file, "ab") if child.spec.log_file else None
        tag = self._tag(child)
        try:
            for raw in iter(proc.stdout.readline, b""):
                line = raw.decode(errors="replace").rstrip()
                child.tail.append(line)
                if sink is not None:
                    sink.write(raw)
                    sink.flush()
                else:
                    with self._out_lock:
                        sys.stdout.write(f"{tag} {line}\n")
                        sys.stdout.flush()
        finally:
            proc.stdout.close()  # a restarted child gets a new pipe; do not keep the old one open
            if sink is not None:
                sink.close()

    def _tag(self, child: Child) -> str:
        colours = ["36", "35", "33", "32", "34"]
        name = child.spec.name
        if not sys.stdout.isatty():
            return f"{name:>10} |"
        return f"\033[{colours[self.children.index(child) % len(colours)]}m{name:>10}\033[0m |"

    def _print(self, message: str) -> None:
        with self._out_lock:
            sys.stdout.write(f"{'supervisor':>10} | {message}\n")
            sys.stdout.flush()

    def _save(self) -> None:
        if self.state_file is not None:
            write_state(self.state_file, [c.snapshot() for c in self.children])

    # -- stopping -----------------------------------------------------------------------------
    def stop(self, deadlines_s: dict[int, float] | None = None, default_deadline_s: float = 30.0) -> None:
        """Stop every child, the highest tier first: SIGTERM, then SIGKILL after the tier's
        deadline. No child is restarted from here on."""
        with self._lock:
            self._stopping.set()
            procs = [(c.spec, c.proc) for c in self.children if c.proc is not None]
        for tier in sorted({spec.tier for spec, _ in procs}, reverse=True):
            group = [(spec, proc) for spec, proc in procs if spec.tier == tier]
            for _, proc in reversed(group):
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + (deadlines_s or {}).get(tier, default_deadline_s)
            for spec, proc in reversed(group):
                try:
                    proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self._say(f"{spec.name} did not stop in time; killing it")
                    proc.kill()
                    proc.wait()
        for child in self.children:
            if child.pump is not None:
                child.pump.join(PUMP_DRAIN_S)
        with self._lock:
            for child in self.children:
                if child.state not in ("crash-loop", "exited"):  # keep why it ended for `agentix status`
                    child.state = "stopped"
            self._save()
