"""Sandbox launcher: run as `python -I -S launcher.py CONFIG_JSON` (see `spec.py`), as root.

Standard library only, in a fresh single-threaded process (so no fork-with-threads hazards):
  1. unshare network, mount, PID, IPC and UTS namespaces (no network: only a down loopback;
     the network namespace is kept only when the config says `"network": true`);
  2. fork: the child is PID 1 of the new PID namespace and dies with the launcher
     (PDEATHSIG), taking every process the user's code started with it;
  3. PID 1 builds a read-only chroot (the interpreter, its libraries, the working directory
     read-write) and forks the user's process, which sets resource limits, drops to an
     unprivileged throw-away uid with no_new_privs, and execs the interpreter.
Exit status: the user process's exit code, 128+N when killed by signal N, 125 when the
sandbox could not be set up (reason on stderr, prefixed with `agentix-sandbox:`)."""

import ctypes
import json
import os
import resource
import select
import signal
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
SETUP_FAILED = 125

libc = ctypes.CDLL(None, use_errno=True)


def fail(message):
    os.write(2, f"agentix-sandbox: {message}\n".encode())
    os._exit(SETUP_FAILED)


def check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        fail(f"{what} failed: {os.strerror(err)} (errno {err})")


def mount(src, dst, flags):
    check(
        libc.mount(src.encode() if src else None, dst.encode(), None, ctypes.c_ulong(flags), None),
        f"mount {src or ''} -> {dst}",
    )


def build_root(cfg):
    root = cfg["root"]
    # Our mounts must not propagate back to the host's namespace.
    mount(None, "/", MS_REC | MS_PRIVATE)
    for src in cfg["ro_binds"]:
        dst = root + src
        os.makedirs(dst, exist_ok=True)
        mount(src, dst, MS_BIND | MS_REC)
        mount(None, dst, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for link, target in cfg["symlinks"]:
        path = root + link
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.lexists(path):
            os.symlink(target, path)
    work = root + cfg.get("work_mount", "/work")
    os.makedirs(work, exist_ok=True)
    mount(cfg["workdir"], work, MS_BIND)
    mount(None, work, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV)
    os.chroot(root)
    os.chdir("/")


def become_user(cfg):
    lim = cfg["limits"]
    resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu_s"], lim["cpu_s"] + 1))
    resource.setrlimit(resource.RLIMIT_AS, (lim["memory_bytes"], lim["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_NPROC, (lim["nproc"], lim["nproc"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (lim["fsize_bytes"], lim["fsize_bytes"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (lim["nofile"], lim["nofile"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    uid = cfg["uid"]
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(no_new_privs)")
    if os.getuid() == 0 or os.geteuid() == 0:
        fail("could not drop root privileges")
    os.chdir(cfg.get("work_mount", "/work"))


def status_code(status):
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def namespace_init(cfg, alive_fd):
    check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(pdeathsig)")
    # getppid() is 0 across the PID namespace boundary, so the launcher's liveness is the open
    # write end of a pipe: readable (EOF) here means it died before PDEATHSIG was armed.
    if select.select([alive_fd], [], [], 0)[0]:
        os._exit(SETUP_FAILED)
    os.close(alive_fd)
    build_root(cfg)
    child = os.fork()
    if child == 0:
        try:
            become_user(cfg)
            os.execve(cfg["python"], cfg["argv"], cfg["env"])
        except Exception as exc:
            fail(f"cannot start the program: {type(exc).__name__}: {exc}")
    # PID 1: reap everything; when the user's process ends, leave, which kills the rest.
    while True:
        pid, status = os.wait()
        if pid == child:
            os._exit(status_code(status))


def main():
    cfg = json.loads(sys.argv[1])
    if os.geteuid() != 0:
        fail("must run as root to create namespaces")
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    if not cfg.get("network", False):
        flags |= CLONE_NEWNET
    check(libc.unshare(flags), "unshare(network, mount, pid namespaces)")
    alive_r, alive_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(alive_w)
            namespace_init(cfg, alive_r)
        except BaseException as exc:
            fail(f"setup failed: {type(exc).__name__}: {exc}")
    _, status = os.waitpid(pid, 0)
    os._exit(status_code(status))


if __name__ == "__main__":
    main()
