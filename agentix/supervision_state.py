"""The supervision state file: `agentix up` writes `<data dir>/supervisor.json` whenever a child
starts, exits or is restarted; `agentix status` reads it. The format is documented in
docs/OPERATIONS.md."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

STATE_FILE = "supervisor.json"


@dataclass
class ProcessState:
    name: str
    kind: str  # "nats" or "service"
    pid: int | None  # None while it is not running
    state: str  # starting, running, restarting, crash-loop, exited, stopped
    restarts: int
    since: float  # when the current (or last) process started, seconds since the epoch
    last_exit: str | None  # "exit code 1", "signal SIGKILL"
    last_exit_at: float | None


def state_path(data_dir: Path) -> Path:
    return data_dir / STATE_FILE


def write_state(path: Path, processes: list[ProcessState]) -> None:
    """Replace the file in one rename, so a reader never sees half of it."""
    doc = {"supervisor_pid": os.getpid(), "updated_at": time.time(), "processes": [asdict(p) for p in processes]}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    os.replace(tmp, path)


def read_state(data_dir: Path) -> dict[str, Any] | None:
    path = state_path(data_dir)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def supervisor_alive(doc: dict[str, Any]) -> bool:
    pid = doc.get("supervisor_pid")
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, run by someone else
        return True
    return True
