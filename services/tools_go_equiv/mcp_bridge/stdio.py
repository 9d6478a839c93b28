"""A stdio MCP server run in the sandbox `code_exec` uses (`shared/sandbox`): its own network
namespace (no network unless the admin allowed it), a read-only chroot of the system libraries,
the interpreter's prefix, the command's directory and the paths the admin listed, a working
directory of its own (kept across restarts), a throw-away uid and resource limits. The MCP SDK's
stdio client starts the launcher and speaks to the server over its stdin and stdout; closing the
session ends the launcher, and with it every process of the server."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcp.client.stdio import StdioServerParameters, stdio_client

from shared.contract.mcp import McpServerConfig
from shared.sandbox.spec import launcher_argv, launcher_config

WORK_MOUNT = "/var/lib/mcp-server"  # its working directory inside (not /work, where a deployment may live)
UID_RANGE = (2_000_000, 3_000_000)  # apart from code_exec's throw-away uids
CPU_S = 24 * 3600  # CPU seconds a server may use before it is killed (and restarted)
LIMITS = {"nproc": 256, "fsize_bytes": 256 * 1024 * 1024, "nofile": 1024}


def _binds(cfg: McpServerConfig) -> list[str]:
    """What the server reads: the command's directory, the absolute paths among its arguments
    (a script's directory), and the admin's `read_paths`."""
    assert cfg.command is not None
    paths = [os.path.dirname(os.path.realpath(cfg.command))]
    paths += [os.path.dirname(os.path.realpath(a)) for a in cfg.args if a.startswith("/") and os.path.exists(a)]
    return [*paths, *cfg.read_paths]


def _kill_uid(uid: int) -> None:
    """No process of the server's uid outlives its session (the launcher's PID namespace already
    takes them down with it; this is belt and braces)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                status = (entry / "status").read_text()
                line = next((ln for ln in status.splitlines() if ln.startswith("Uid:")), "")
                if line and int(line.split()[1]) == uid:
                    os.kill(int(entry.name), signal.SIGKILL)


def _prepare(name: str, uid: int, work_root: Path) -> tuple[Path, Path]:
    """(the chroot's throw-away base, the server's working directory, owned by this run's uid)."""
    work = work_root / name
    work.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix=f"agentix-mcp-{name}-"))
    (base / "root").mkdir(mode=0o755)
    base.chmod(0o711)
    for path in (work, *work.rglob("*")):  # the server's own files, whichever uid wrote them before
        with contextlib.suppress(OSError):
            os.chown(path, uid, uid, follow_symlinks=False)
    return base, work


@contextlib.asynccontextmanager
async def sandboxed_stdio(cfg: McpServerConfig, env: dict[str, str], work_root: Path) -> AsyncIterator[Any]:
    """The SDK's stdio transport to `cfg.command` running in the sandbox."""
    assert cfg.command is not None
    uid = secrets.randbelow(UID_RANGE[1] - UID_RANGE[0]) + UID_RANGE[0]
    base, work = await asyncio.to_thread(_prepare, cfg.name, uid, work_root)
    root = base / "root"
    bin_dir = os.path.dirname(cfg.command)
    config = launcher_config(
        root=root, work=work, uid=uid, program=cfg.command, argv=[cfg.command, *cfg.args],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": WORK_MOUNT, "TMPDIR": WORK_MOUNT, "LANG": "C.UTF-8",
             **env},
        limits={"cpu_s": CPU_S, "memory_bytes": cfg.memory_mb * 1024 * 1024, **LIMITS},
        extra_binds=_binds(cfg), network=cfg.network, work_mount=WORK_MOUNT,
    )  # fmt: skip
    program, *args = launcher_argv(config)
    try:
        async with stdio_client(StdioServerParameters(command=program, args=args, env={})) as streams:
            yield streams
    finally:
        await asyncio.to_thread(_cleanup, uid, base)


def _cleanup(uid: int, base: Path) -> None:
    _kill_uid(uid)
    shutil.rmtree(base, ignore_errors=True)
