"""code_exec through NATS (tools_py running in this process): each escape attempt is contained
and answered with a clear error; the operating-system layer holds on its own, too."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.tools_py.sandbox import Limits, Sandbox
from shared.settings import Settings
from tests.integration.test_tools_support import InProcess, ToolError, Tools, connected

SITE = os.path.join(sys.base_prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root for namespaces")


@pytest.fixture
async def tools(settings: Settings) -> AsyncIterator[Tools]:
    async with connected(settings) as bus:
        services = await InProcess(settings, go=False).start()
        t = Tools(bus)
        await t.ready(("py",))
        yield t
        await services.stop()


async def run(tools: Tools, code: str, **kw: object) -> dict:
    return await tools("code_exec", code=code, **kw)


async def test_runs_python_and_is_declared_high_risk(tools: Tools) -> None:
    out = await run(tools, "import json, math\nprint(json.dumps({'pi': round(math.pi, 2)}))")
    assert out["ok"] and out["exit_code"] == 0 and out["stdout"] == '{"pi": 3.14}\n'
    descriptor = next(d for d in await tools.client.list_tools() if d.name == "code_exec")
    assert descriptor.high_risk and descriptor.agent and descriptor.service == "py"


async def test_files_are_in_the_throwaway_working_directory(tools: Tools) -> None:
    code = "import os\nprint(open('data.csv').read().strip())\nopen('out.txt','w').write('x')\nprint(os.getcwd())"
    out = await run(tools, code, files={"data.csv": "a,b\n1,2"})
    assert out["ok"] and out["stdout"] == "a,b\n1,2\n/work\n"
    again = await run(tools, "import os\nprint(sorted(os.listdir('.')))")
    assert again["stdout"] == "['main.py']\n"  # nothing left over from the previous run


@pytest.mark.parametrize(
    ("name", "code", "limit", "message"),
    [
        ("network", "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)", "violation",
         "network access is disabled"),
        ("fork bomb", "import os\nwhile True:\n    os.fork()", "violation", "creating processes is not allowed"),
        ("subprocess", "import subprocess\nsubprocess.run(['ls', '/'])", "violation", "creating processes"),
        ("memory hog", "blocks = []\nwhile True:\n    blocks.append(bytearray(50 * 1024 * 1024))", "memory",
         "memory limit of 128 MiB exceeded"),
        ("read outside", "print(open('/etc/passwd').read())", "violation", "outside the working directory"),
        ("read via ..", "print(open('../../../etc/hostname').read())", "violation", "outside the working directory"),
        # Mounted read-only for the interpreter, yet not the code's business.
        ("interpreter files", f"import os\nprint(os.listdir({SITE!r}))", "violation", "outside the working dir"),
        ("sleeping forever", "import time\ntime.sleep(600)", "timeout", "wall-clock limit of 2 s exceeded"),
        ("ctypes", "import ctypes", "violation", "importing ctypes is not allowed"),
    ],
)  # fmt: skip
async def test_escapes_are_contained_with_a_clear_error(
    tools: Tools, name: str, code: str, limit: str, message: str
) -> None:
    out = await run(tools, code, timeout_s=2, memory_mb=128)
    assert not out["ok"], name
    assert out["limit"] == limit, (name, out)
    assert message in out["error"], (name, out["error"])


async def test_output_is_capped(tools: Tools) -> None:
    out = await run(tools, "print('x' * 1_000_000)")
    assert out["ok"] and out["stdout_truncated"] and len(out["stdout"]) == 64 * 1024


async def test_bad_requests_are_refused(tools: Tools) -> None:
    with pytest.raises(ToolError) as err:
        await run(tools, "console.log(1)", language="javascript")
    assert err.value.code == "unsupported_language"
    with pytest.raises(ToolError) as err:
        await run(tools, "print(1)", files={"../escape.py": "x"})
    assert err.value.code == "bad_arguments"
    with pytest.raises(ToolError) as err:
        await run(tools, "print(1)", timeout_s=3600)
    assert err.value.code == "bad_arguments"


async def test_a_busy_loop_is_stopped_by_the_cpu_limit() -> None:
    """CPU time, not the clock: with a wall-clock limit far beyond it, a busy loop meets the CPU
    limit first even on a loaded machine (through code_exec the two are 0.6:1, so on a busy
    machine the clock may rightly win, and that case is a timeout)."""
    out = await Sandbox().run("while True:\n    pass", Limits(timeout_s=60, cpu_s=1, memory_mb=128, nproc=8))
    assert not out.ok and out.limit == "cpu", out
    assert out.error is not None and "CPU time limit of 1 s exceeded" in out.error


async def test_the_os_layer_contains_code_without_the_audit_hooks() -> None:
    """If the audit hooks were bypassed, namespaces, chroot, uid and rlimits still hold."""
    box = Sandbox()
    limits = Limits(timeout_s=5, cpu_s=5, memory_mb=128, nproc=8)
    net = await box.run("import socket\nsocket.create_connection(('127.0.0.1', 4222), timeout=2)", limits,
                        audit_layer=False)  # fmt: skip
    assert "Network is unreachable" in net.stderr
    read = await box.run("open('/etc/passwd')", limits, audit_layer=False)
    assert "FileNotFoundError" in read.stderr
    who = await box.run("import os\nprint(os.getuid(), sorted(os.listdir('/')))", limits, audit_layer=False)
    uid, listing = who.stdout.split(" ", 1)
    assert int(uid) >= 200_000 and "etc" not in listing and "root" in listing  # only the interpreter's prefix
    forks = await box.run(
        "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(60)\n"
        "            os._exit(0)\n        n += 1\nexcept OSError as e:\n    print(n, e.errno)",
        limits,
        audit_layer=False,
    )
    count, errno = forks.stdout.split()
    assert int(count) < 8 and int(errno) == 11  # EAGAIN: the process limit
    # The sleeping children died with the run (PID namespace torn down).
    sleepers = _processes_of(int(uid))
    assert sleepers == []
    hog = await box.run("x = bytearray(512 * 1024 * 1024)", limits, audit_layer=False)
    assert "MemoryError" in hog.stderr


def _processes_of(uid: int) -> list[Path]:
    return [p for p in Path("/proc").iterdir() if p.name.isdigit() and _uid(p) == uid]


def _uid(proc: Path) -> int | None:
    try:
        line = next(ln for ln in (proc / "status").read_text().splitlines() if ln.startswith("Uid:"))
        return int(line.split()[1])
    except (OSError, StopIteration):
        return None
