"""`agentix up`: NATS from the wheel plus the four services as child processes with prefixed
logs. Ctrl-C drains the services first, then stops NATS."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from shared.natsd import NatsServer, port_is_free

SERVICES: list[tuple[str, str]] = [
    ("tools-py", "services.tools_py"),
    ("tools-go", "services.tools_go_equiv"),
    ("dispatcher", "services.dispatcher"),
    ("gateway", "services.gateway"),
]
COLOURS = ["36", "35", "33", "32", "34"]


def _pump(name: str, colour: str, stream, lock: threading.Lock) -> None:
    tty = sys.stdout.isatty()
    tag = f"\033[{colour}m{name:>10}\033[0m |" if tty else f"{name:>10} |"
    for raw in iter(stream.readline, b""):
        with lock:
            sys.stdout.write(f"{tag} {raw.decode(errors='replace').rstrip()}\n")
            sys.stdout.flush()


class Suite:
    def __init__(self, data_dir: Path, env: dict[str, str], log_dir: Path | None = None) -> None:
        """Children's output goes to the terminal with a prefix, or to `<log_dir>/<name>.log`."""
        self.data_dir = data_dir
        self.env = env
        self.log_dir = log_dir
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._lock = threading.Lock()

    def spawn(self, name: str, module: str, args: list[str]) -> subprocess.Popen[bytes]:
        out = open(self.log_dir / f"{name}.log", "ab") if self.log_dir else subprocess.PIPE
        proc = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches only us; we stop children in order
        )
        if proc.stdout is not None:
            colour = COLOURS[len(self.children) % len(COLOURS)]
            threading.Thread(target=_pump, args=(name, colour, proc.stdout, self._lock), daemon=True).start()
        self.children.append((name, proc))
        return proc

    def stop(self, timeout_s: float = 30.0) -> None:
        # Front door first, workers after: the gateway stops taking tasks before they drain.
        for _, proc in reversed(self.children):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for name, proc in reversed(self.children):
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                print(f"{name} did not stop in time; killing it", flush=True)
                proc.kill()

    def dead(self) -> str | None:
        for name, proc in self.children:
            if proc.poll() is not None:
                return f"{name} exited with code {proc.returncode}"
        return None


def wait_ready(url: str, suite: Suite, timeout_s: float = 90.0) -> bool:
    """Until the gateway is ready and every service of the suite has sent a heartbeat (a tool
    service that is still starting would fail a first task's tool node as `unknown_tool`)."""
    wanted = {name for name, _ in SERVICES if name != "gateway"}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if suite.dead():
            return False
        try:
            resp = httpx.get(f"{url}/ready", timeout=2)
            if resp.status_code == 200 and wanted <= set(resp.json().get("services", {})):
                return True
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.3)
    return False


def up(data_dir: Path, port: int, nats_url: str | None, host: str = "127.0.0.1") -> int:
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    nats: NatsServer | None = None
    if nats_url is None:
        nats_port = 4222 if port_is_free(4222) else None
        nats = NatsServer(data_dir / "nats", port=nats_port, log_file=data_dir / "nats-server.log").start()
        nats_url = nats.url
        print(f"nats-server with JetStream on {nats_url} (store {data_dir / 'nats'})", flush=True)

    env = {**os.environ, "AGENTIX_NATS_SERVERS": nats_url, "AGENTIX_DATA_DIR": str(data_dir),
           "PYTHONUNBUFFERED": "1"}
    suite = Suite(data_dir, env)
    stopping = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    code = 0
    try:
        migrate = subprocess.run([sys.executable, "-m", "services.gateway", "migrate"], env=env, check=False)
        if migrate.returncode != 0:
            print("database migration failed; not starting", flush=True)
            return 1
        for name, module in SERVICES:
            args = ["--port", str(port), "--host", host] if name == "gateway" else []
            suite.spawn(name, module, args)
        api = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
        if not wait_ready(api, suite):
            print(f"the suite did not become ready: {suite.dead() or 'timed out waiting for /ready'}", flush=True)
            return 1
        _banner(api, data_dir)
        while not stopping:
            if (why := suite.dead()) is not None:
                print(f"stopping: {why}", flush=True)
                code = 1
                break
            time.sleep(0.3)
    finally:
        print("stopping services…", flush=True)
        suite.stop()
        if nats is not None:
            nats.stop()
        print("stopped.", flush=True)
    return code


def _banner(api: str, data_dir: Path) -> None:
    from shared.auth_tokens import mint_token
    from shared.settings import Settings

    token = mint_token(Settings(data_dir=data_dir), "dev", admin=True)
    print(
        f"""
Agentix is up.
  API        {api}/api/v1   (docs {api}/docs, console {api}/console)
  Dev token  {token}
  Try        agentix run examples/hello.json --url {api} --data-dir {data_dir} \\
                 --input '{{"text": "What does Agentix do?"}}'
             curl -H "Authorization: Bearer <dev token>" {api}/api/v1/tasks
Press Ctrl-C to stop.
""",
        flush=True,
    )
