"""What the sandbox launcher is given: the read-only binds and symlinks of the chroot, the
program, its environment, limits, and whether it may use the network."""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path
from typing import Any

LAUNCHER = Path(__file__).resolve().parent / "launcher.py"
SETUP_FAILED = 125  # the launcher's exit status when the sandbox could not be set up


def interpreter() -> str:
    # The real binary (not a venv symlink), so the chroot needs only its install prefix.
    return os.path.realpath(sys.executable)


def mounts(extra: list[str] | None = None) -> tuple[list[str], list[tuple[str, str]]]:
    """Read-only binds (the system libraries, the interpreter's prefix, then `extra` paths) and the
    host's top-level symlinks (`/lib -> usr/lib` on merged-usr systems) mirrored in the chroot."""
    binds: list[str] = []
    links: list[tuple[str, str]] = []
    prefix = os.path.realpath(sys.base_prefix)
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    for top in ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/lib32"):
        if os.path.islink(top):
            links.append((top, os.readlink(top)))
        elif os.path.isdir(top) and not any(top.startswith(b + "/") or top == b for b in binds):
            binds.append(top)
    for path in (prefix, stdlib, *(os.path.realpath(p) for p in extra or [])):
        if os.path.exists(path) and not any(path == b or path.startswith(b + "/") for b in binds):
            binds.append(path)
    return binds, links


def launcher_config(*, root: Path, work: Path, uid: int, program: str, argv: list[str], env: dict[str, str],
                    limits: dict[str, int], extra_binds: list[str] | None = None, network: bool = False,
                    work_mount: str = "/work") -> dict[str, Any]:  # fmt: skip
    """The launcher's one argument (as JSON). `limits`: cpu_s, memory_bytes, nproc, fsize_bytes,
    nofile; `work` is mounted read-write at `work_mount` (over whatever a bind put there) and is
    the program's working directory."""
    binds, links = mounts(extra_binds)
    return {"root": str(root), "workdir": str(work), "ro_binds": binds, "symlinks": links, "uid": uid,
            "python": program, "argv": argv, "env": env, "limits": limits, "network": network,
            "work_mount": work_mount}  # fmt: skip


def launcher_argv(config: dict[str, Any]) -> list[str]:
    """The command that starts the launcher with `config` (as root)."""
    import json

    return [interpreter(), "-I", "-S", str(LAUNCHER), json.dumps(config)]
