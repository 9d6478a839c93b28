"""Runs Python code in the shared sandbox (`shared/sandbox/launcher.py`) and reports what happened
in plain words.

Containment: no network (own network namespace), own PID namespace (every process dies with
the run), a read-only chroot holding only the interpreter and the working directory, a
throw-away unprivileged uid, CPU/memory/process/file-size limits, a wall-clock deadline and
capped output. Where namespaces cannot be created the runner refuses to run anything."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from shared.errors import AgentixError
from shared.sandbox.spec import interpreter, launcher_argv, launcher_config

HERE = Path(__file__).resolve().parent
PRELUDE = (HERE / "prelude.py").read_text()
SETUP_FAILED = 125
EXIT_MEMORY = 90
EXIT_VIOLATION = 91
UID_RANGE = (200_000, 2_000_000)


class SandboxUnavailable(AgentixError, RuntimeError):
    """This host cannot isolate code (no namespaces): running it would be unsafe."""

    code = "sandbox_unavailable"
    http_status = 503


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 256
    nproc: int = 16
    fsize_mb: int = 16
    nofile: int = 64
    max_output: int = 64 * 1024
    # Output beyond this many bytes kills the run (capped output is kept, the rest discarded).
    kill_output: int = 8 * 1024 * 1024


class RunResult(BaseModel):
    ok: bool
    exit_code: int | None
    stdout: str
    stderr: str
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ms: float
    limit: str | None = None
    error: str | None = None


class Sandbox:
    def __init__(self, base_dir: Path | None = None) -> None:
        self.base_dir = base_dir
        self._probe: str | bool | None = False  # False = not probed; None = fine; str = reason

    async def available(self) -> str | None:
        """None when the sandbox works here, else the reason it cannot."""
        if self._probe is False:
            self._probe = await self._check()
        return self._probe if isinstance(self._probe, str) else None

    async def _check(self) -> str | None:
        if not sys.platform.startswith("linux"):
            return "code execution needs Linux namespaces; this host is not Linux"
        if os.geteuid() != 0:
            return (
                "code execution needs root (CAP_SYS_ADMIN) to create network, mount and PID "
                "namespaces; refusing to run code without network isolation"
            )
        try:
            result = await self._run("print('sandbox-ok')", Limits(timeout_s=20, cpu_s=10), {})
        except SandboxUnavailable as exc:
            return str(exc)
        if result.stdout.strip() != "sandbox-ok":
            return f"sandbox self-test failed: {result.error or result.stderr.strip()[-300:]}"
        return None

    async def run(
        self, code: str, limits: Limits, files: dict[str, str] | None = None, *, audit_layer: bool = True
    ) -> RunResult:
        """`audit_layer=False` runs without the prelude's audit hooks (tests use it to show the
        operating-system layer contains the code on its own)."""
        reason = await self.available()
        if reason:
            raise SandboxUnavailable(reason)
        return await self._run(code, limits, files or {}, audit_layer)

    async def _run(self, code: str, limits: Limits, files: dict[str, str], audit_layer: bool = True) -> RunResult:
        uid = secrets.randbelow(UID_RANGE[1] - UID_RANGE[0]) + UID_RANGE[0]
        base = await asyncio.to_thread(_prepare, self.base_dir, uid, {**files, "main.py": code})
        try:
            return await self._launch(base / "root", base / "work", uid, limits, audit_layer)
        finally:
            await asyncio.to_thread(_cleanup, uid, base)

    async def _launch(self, root: Path, work: Path, uid: int, limits: Limits, audit_layer: bool) -> RunResult:
        python = interpreter()
        flags = [python, "-I", "-S", "-B", "-X", "utf8"]
        argv = [*flags, "-c", PRELUDE, "/work/main.py"] if audit_layer else [*flags, "/work/main.py"]
        config = launcher_config(
            root=root,
            work=work,
            uid=uid,
            program=python,
            argv=argv,
            env={
                "PATH": "/usr/bin:/bin",
                "HOME": "/work",
                "TMPDIR": "/work",
                "LANG": "C.UTF-8",
                "AGENTIX_SANDBOX_MEMORY_MB": str(limits.memory_mb),
            },
            limits={
                "cpu_s": limits.cpu_s,
                "memory_bytes": limits.memory_mb * 1024 * 1024,
                "nproc": limits.nproc,
                "fsize_bytes": limits.fsize_mb * 1024 * 1024,
                "nofile": limits.nofile,
            },
        )
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            *launcher_argv(config),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        out, err = _Capture(limits.max_output), _Capture(limits.max_output)
        flooded = asyncio.Event()
        readers = [
            asyncio.create_task(_pump(proc.stdout, out, limits.kill_output, flooded)),
            asyncio.create_task(_pump(proc.stderr, err, limits.kill_output, flooded)),
        ]
        limit: str | None = None
        waiter = asyncio.create_task(proc.wait())
        flood = asyncio.create_task(flooded.wait())
        try:
            done, _ = await asyncio.wait({waiter, flood}, timeout=limits.timeout_s, return_when=asyncio.FIRST_COMPLETED)
            if waiter not in done:
                limit = "output" if flood in done else "timeout"
                _kill_group(proc.pid)
                await waiter
            await asyncio.gather(*readers)
        finally:
            flood.cancel()
            if proc.returncode is None:
                _kill_group(proc.pid)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(waiter, 5)
        duration_ms = (time.perf_counter() - started) * 1000
        return _verdict(proc.returncode, out, err, limit, limits, duration_ms)


def _prepare(base_dir: Path | None, uid: int, files: dict[str, str]) -> Path:
    """A throw-away directory: `root/` (empty mount points for the chroot, root-owned) and
    `work/` (the code's files, owned by the run's uid)."""
    base = Path(tempfile.mkdtemp(prefix="agentix-sbx-", dir=base_dir))
    root, work = base / "root", base / "work"
    root.mkdir(mode=0o755)
    work.mkdir(mode=0o700)
    base.chmod(0o711)
    for name, content in files.items():
        (work / name).write_text(content, encoding="utf-8")
    for path in (work, *work.iterdir()):
        os.chown(path, uid, uid)
    return base


def _cleanup(uid: int, base: Path) -> None:
    _kill_uid(uid)
    shutil.rmtree(base, ignore_errors=True)


class _Capture:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.data)

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


async def _pump(stream: asyncio.StreamReader | None, sink: _Capture, kill_at: int, flooded: asyncio.Event) -> None:
    if stream is None:
        return
    while chunk := await stream.read(65536):
        sink.add(chunk)
        if sink.total > kill_at:
            flooded.set()


def _kill_group(pgid: int) -> None:
    # Killing the launcher is enough (PID 1 of the namespace has PDEATHSIG, and when it dies the
    # kernel kills the namespace), but take the whole group down at once.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _kill_uid(uid: int) -> None:
    """Belt and braces: no process of the throw-away uid may outlive its run."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            status = (entry / "status").read_text()
            line = next((ln for ln in status.splitlines() if ln.startswith("Uid:")), "")
            if line and int(line.split()[1]) == uid:
                os.kill(int(entry.name), signal.SIGKILL)


def _verdict(
    code: int | None, out: _Capture, err: _Capture, limit: str | None, limits: Limits, duration_ms: float
) -> RunResult:
    stderr = err.text()
    error: str | None = None
    if limit == "timeout":
        error = f"wall-clock limit of {limits.timeout_s:g} s exceeded; the run was killed"
    elif limit == "output":
        error = f"output limit exceeded (more than {limits.kill_output} bytes); the run was killed"
    elif code == SETUP_FAILED and "agentix-sandbox:" in stderr:
        reason = stderr.split("agentix-sandbox:", 1)[1].strip().splitlines()[0]
        raise SandboxUnavailable(f"the sandbox could not be set up: {reason}")
    elif code == EXIT_MEMORY:
        limit, error = "memory", f"memory limit of {limits.memory_mb} MiB exceeded"
    elif code == EXIT_VIOLATION:
        limit = "violation"
        error = next(
            (ln.strip() for ln in reversed(stderr.splitlines()) if ln.startswith("sandbox:")),
            "sandbox: a forbidden operation was attempted",
        )
    elif code is not None and code > 128:
        sig = code - 128
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and duration_ms / 1000 >= limits.cpu_s):
            limit, error = "cpu", f"CPU time limit of {limits.cpu_s} s exceeded"
        elif sig == signal.SIGXFSZ:
            limit, error = "file_size", f"file size limit of {limits.fsize_mb} MiB exceeded"
        elif sig == signal.SIGKILL:
            limit, error = "memory", f"killed (most likely the memory limit of {limits.memory_mb} MiB)"
        else:
            error = f"killed by signal {signal.Signals(sig).name}"
    elif code:
        error = _last_error_line(stderr) or f"exited with code {code}"
    return RunResult(
        ok=code == 0 and limit is None,
        exit_code=code,
        stdout=out.text(),
        stderr=stderr,
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        duration_ms=round(duration_ms, 1),
        limit=limit,
        error=error,
    )


def _last_error_line(stderr: str) -> str | None:
    for line in reversed(stderr.strip().splitlines()):
        if line and not line.startswith(" "):
            return line.strip()[:500]
    return None
