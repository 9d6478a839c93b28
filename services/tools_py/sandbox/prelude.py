"""Runs inside the sandboxed interpreter before the user's code (passed with `python -c`).

Audit hooks turn the common escape attempts into one clear error each. They are the polite
layer: the real containment is the operating system's (network/mount/PID namespaces, chroot,
an unprivileged uid and resource limits), which holds even if this layer is bypassed.
Standard library only: this file runs in a chroot that holds nothing else."""

import os
import sys

WORK = "/work"
MAIN = sys.argv[1] if len(sys.argv) > 1 else "/work/main.py"
MEMORY_MB = os.environ.get("AGENTIX_SANDBOX_MEMORY_MB", "?")
_READ_OK = tuple(os.path.realpath(p) + os.sep for p in sys.path if p and os.path.isdir(p))
_PROCESS_EVENTS = {
    "os.fork",
    "os.forkpty",
    "os.posix_spawn",
    "os.spawn",
    "os.exec",
    "os.system",
    "subprocess.Popen",
    "pty.spawn",
    "os.startfile",
}
_NETWORK_EVENTS = {
    "socket.__new__",
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.sendmsg",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.gethostbyaddr",
    "socket.getnameinfo",
}
_BLOCKED_IMPORTS = {"ctypes", "_ctypes"}


class SandboxViolation(PermissionError):
    pass


def _inside(path, roots):
    return path == WORK or path.startswith(roots)


def _check_path(raw, writing):
    if isinstance(raw, int):
        return
    if isinstance(raw, bytes):
        raw = os.fsdecode(raw)
    path = os.path.realpath(os.path.join(os.getcwd(), raw)) if raw else WORK
    if "/site-packages" in path or "/dist-packages" in path:  # mounted, but not importable here
        raise SandboxViolation(f"sandbox: access to {raw} is outside the working directory and not allowed")
    if writing and not _inside(path, (WORK + os.sep,)):
        raise SandboxViolation(f"sandbox: writing {raw} is outside the working directory and not allowed")
    if not _inside(path, (WORK + os.sep, *_READ_OK)):
        raise SandboxViolation(f"sandbox: access to {raw} is outside the working directory and not allowed")


def _hook(event, args):
    if event == "open":
        path, mode, flags = args
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
        )
        _check_path(path, bool(writing))
    elif event in ("os.listdir", "os.scandir", "os.chdir", "os.remove", "os.rename", "os.rmdir", "os.mkdir"):
        _check_path(args[0] if args else ".", event not in ("os.listdir", "os.scandir", "os.chdir"))
    elif event in _PROCESS_EVENTS:
        raise SandboxViolation("sandbox: creating processes is not allowed (fork/exec/subprocess are disabled)")
    elif event in _NETWORK_EVENTS:
        raise SandboxViolation("sandbox: network access is disabled")
    elif event == "import" and args and args[0] in _BLOCKED_IMPORTS:
        raise SandboxViolation(f"sandbox: importing {args[0]} is not allowed")


def _exit(code, message):
    # os._exit skips interpreter teardown (user atexit hooks cannot mask the verdict),
    # so flush what the user printed first.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    if message:
        os.write(2, message.encode("utf-8", "replace"))
    os._exit(code)


def _main():
    with open(MAIN, encoding="utf-8") as f:
        source = f.read()
    sys.argv = ["main.py"]
    glb = {"__name__": "__main__", "__file__": "main.py", "__builtins__": __builtins__}
    try:
        code = compile(source, "main.py", "exec")
        sys.addaudithook(_hook)
        exec(code, glb)
    except SandboxViolation as exc:
        _exit(91, f"\n{exc}\n")
    except MemoryError:
        _exit(90, f"\nsandbox: memory limit of {MEMORY_MB} MiB exceeded (MemoryError)\n")
    except SystemExit:
        raise
    except BaseException as exc:
        # The user's traceback without this prelude's frame.
        import traceback

        frame = exc.__traceback__
        traceback.print_exception(type(exc), exc, frame.tb_next if frame is not None else None)
        _exit(1, "")


_main()
