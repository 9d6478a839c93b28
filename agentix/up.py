"""`agentix up`: NATS from the wheel (one server, or a local cluster) plus the four services as
supervised child processes with prefixed logs. A child that exits is restarted; Ctrl-C (or a
crash loop) drains the services first, then stops NATS.

This process only supervises, and stays small while the suite runs: it imports none of the
services, no database layer and no HTTP client library (the standard library polls `/ready`).
What needs the gateway's database (migrations, the console login, the banner's token) runs in a
short-lived child, `python -m services.gateway prepare`. tests/integration/test_up_imports.py and
tests/e2e/test_cli_up.py hold it to that."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from agentix import cluster
from agentix.probe import get_json
from agentix.supervision_state import state_path
from agentix.supervisor import ChildSpec, Supervisor

SERVICES: list[tuple[str, str]] = [
    ("tools-py", "services.tools_py"),
    ("tools-go", "services.tools_go_equiv"),
    ("dispatcher", "services.dispatcher"),
    ("gateway", "services.gateway"),
]
SERVICE_TIER = 1
NATS_STOP_DEADLINE_S = 10.0
DEV_ADMIN = "dev"  # the console login created on a fresh data dir; the banner's token is for it too


def service_spec(name: str, module: str, args: list[str], env: dict[str, str], log_dir: Path | None) -> ChildSpec:
    return ChildSpec(name, [sys.executable, "-m", module, *args], env, tier=SERVICE_TIER,
                     log_file=log_dir / f"{name}.log" if log_dir else None)


class Suite(Supervisor):
    """The four services without restarts, for the end-to-end harness: a service that dies there
    is a failure to report, not to hide. Output goes to the terminal or `<log_dir>/<name>.log`."""

    def __init__(self, data_dir: Path, env: dict[str, str], log_dir: Path | None = None) -> None:
        super().__init__(restart=False)
        self.data_dir = data_dir
        self.env = env
        self.log_dir = log_dir

    def spawn(self, name: str, module: str, args: list[str]) -> subprocess.Popen[bytes]:
        return self.start(service_spec(name, module, args, self.env, self.log_dir))

    def dead(self) -> str | None:
        return self.failure


def wait_ready(url: str, supervisor: Supervisor, stop: threading.Event | None = None,
               timeout_s: float = 90.0) -> bool:
    """Until the gateway is ready and every service of the suite has sent a heartbeat (a tool
    service that is still starting would fail a first task's tool node as `unknown_tool`).
    A service restarted meanwhile is waited for; a crash loop ends the wait."""
    wanted = {name for name, _ in SERVICES if name != "gateway"}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not supervisor.failed.is_set():
        if stop is not None and stop.is_set():
            return False
        ready = get_json(f"{url}/ready")
        if ready is not None and wanted <= set(ready.get("services", {})):
            return True
        time.sleep(0.3)
    return False


def up(data_dir: Path, port: int, nats_url: str | None, host: str = "127.0.0.1", cluster_size: int = 0) -> int:
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    supervisor = Supervisor(state_file=state_path(data_dir))
    stopping = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    env = {**os.environ, "AGENTIX_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
    try:
        if nats_url is not None:
            env["AGENTIX_NATS_SERVERS"] = nats_url
        elif not _start_nats(supervisor, data_dir, cluster_size, env):
            return 1
        prepared = _prepare_database(env)
        if prepared is None:
            print("database migration failed; not starting", flush=True)
            return 1
        print(f"gateway database at revision {prepared['revision']}", flush=True)
        for name, module in SERVICES:
            args = ["--port", str(port), "--host", host] if name == "gateway" else []
            supervisor.start(service_spec(name, module, args, env, None))
        api = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
        if not wait_ready(api, supervisor, stopping):
            if stopping.is_set():
                return 0
            print(f"the suite did not become ready: {_why(supervisor) or 'timed out waiting for /ready'}", flush=True)
            return 1
        _banner(api, data_dir, prepared["password"], prepared["token"])
        # Waking twice a second only to notice Ctrl-C, which sets `stopping` from the handler.
        while not stopping.is_set() and not supervisor.failed.wait(0.5):
            pass
        if supervisor.failed.is_set():
            print(f"stopping: {_why(supervisor)}", flush=True)
            return 1
        return 0
    finally:
        print("stopping services…", flush=True)
        supervisor.stop({cluster.NATS_TIER: NATS_STOP_DEADLINE_S})
        print("stopped.", flush=True)


def _prepare_database(env: dict[str, str]) -> dict[str, Any] | None:
    """Migrate and make sure the dev admin exists, in a child process (its log lines reach the
    terminal on stderr); what it printed on stdout, or None when it failed."""
    argv = [sys.executable, "-m", "services.gateway", "prepare", "--admin", DEV_ADMIN]
    done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, check=False)
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    if done.returncode != 0 or not lines:
        return None
    try:
        prepared: dict[str, Any] = json.loads(lines[-1])
    except ValueError:
        return None
    return prepared


def _start_nats(supervisor: Supervisor, data_dir: Path, cluster_size: int, env: dict[str, str]) -> bool:
    """Start the NATS node(s) under the supervisor, wait until healthy, point `env` at them."""
    nodes = cluster.cluster_nodes(data_dir, cluster_size) if cluster_size else cluster.single_node(data_dir)
    for spec in cluster.node_specs(nodes, data_dir, env):
        supervisor.start(spec)
    if not cluster.wait_healthy(nodes, given_up=supervisor.failed.is_set):
        print(f"NATS did not become healthy: {_why(supervisor) or 'timed out'}", flush=True)
        return False
    env.update(cluster.services_env(nodes))
    urls = env["AGENTIX_NATS_SERVERS"]
    if cluster_size:
        print(f"NATS cluster of {len(nodes)} nodes with JetStream (replicas {env['AGENTIX_JS_REPLICAS']}) on {urls} "
              f"(stores under {data_dir / 'nats-cluster'})", flush=True)
    else:
        print(f"nats-server with JetStream on {urls} (store {nodes[0].store_dir})", flush=True)
    return True


def _why(supervisor: Supervisor) -> str | None:
    """Why the supervisor gave up, with the last lines the process printed."""
    if supervisor.failure is None or supervisor.failed_child is None:
        return supervisor.failure
    lines = supervisor.last_lines(supervisor.failed_child)
    tail = "\n".join(f"  | {line}" for line in lines) or "  (no output)"
    return f"{supervisor.failure}\nlast output of {supervisor.failed_child}:\n{tail}"


def _banner(api: str, data_dir: Path, dev_password: str | None, token: str) -> None:
    if dev_password is not None:
        login = f"user {DEV_ADMIN!r}, password {dev_password}   (shown this once: note it down)"
    else:
        login = (f"user {DEV_ADMIN!r} with the password printed when this data dir was created\n"
                 f"             (forgot it? agentix user add {DEV_ADMIN} --admin --data-dir {data_dir})")
    # The CLI's defaults find this suite when it runs on port 8080 from `./.agentix`; else say where.
    defaults = api == "http://127.0.0.1:8080" and data_dir == Path(".agentix").resolve()
    where = "" if defaults else f" --url {api} --data-dir {data_dir}"
    print(
        f"""
Agentix is up.
  API        {api}/api/v1   (docs {api}/docs)
  Console    {api}/console
  Log in as  {login}
  Dev token  {token}
  Try        agentix run examples/hello.json{where}
             agentix approve TASK_ID{where}   (answers a task that waits for approval)
             agentix status{where}   (services, queues, and restarts of this supervisor)
             curl -H "Authorization: Bearer <dev token>" {api}/api/v1/tasks
Press Ctrl-C to stop.
""",
        flush=True,
    )
