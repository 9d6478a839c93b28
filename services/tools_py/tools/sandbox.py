"""`code_exec`: run Python in the sandbox (no network, own filesystem view, limits). High risk:
the dispatcher's approval rule sees the flag."""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, Field, field_validator

from services.tools_py import runtime
from services.tools_py.registry import RUNS_CODE, registry
from services.tools_py.sandbox import Limits, SandboxUnavailable
from shared.bus.tools import ToolContext, ToolFailure

_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")


class CodeExecArgs(BaseModel):
    code: str = Field(min_length=1, max_length=200_000, description="Python 3 source to run as main.py")
    language: str = Field(default="python", description="only `python` is supported")
    timeout_s: float = Field(default=10.0, gt=0, description="wall-clock limit in seconds")
    memory_mb: int = Field(default=256, ge=32, description="address-space limit in MiB")
    files: dict[str, str] = Field(
        default_factory=dict, description="extra text files placed next to main.py (name → content)"
    )

    @field_validator("files")
    @classmethod
    def _files(cls, files: dict[str, str]) -> dict[str, str]:
        if len(files) > 20:
            raise ValueError("at most 20 files")
        for name in files:
            if not _FILE_NAME.match(name) or name == "main.py":
                raise ValueError(f"bad file name {name!r} (plain names only, no paths, not main.py)")
        if sum(len(c) for c in files.values()) > 1_000_000:
            raise ValueError("files hold more than 1,000,000 characters in total")
        return files


@registry.tool(
    name="code_exec",
    title="Run Python code",
    description=(
        "Run a Python 3 program (standard library only) in an isolated sandbox with no network, "
        "a throw-away working directory and CPU/memory/time limits. Returns stdout, stderr, the "
        "exit code and, when a limit was hit or a forbidden operation attempted, `error`."
    ),
    high_risk=True,
    annotations=RUNS_CODE,
)
async def code_exec(args: CodeExecArgs, ctx: ToolContext) -> dict[str, Any]:
    if args.language.strip().lower() not in ("python", "python3", "py"):
        raise ToolFailure("unsupported_language", f"only Python is supported, not {args.language!r}")
    rt = runtime.get()
    settings = rt.settings
    if args.timeout_s > settings.sandbox_max_timeout_s:
        raise ToolFailure("bad_arguments", f"timeout_s may be at most {settings.sandbox_max_timeout_s:g}")
    if args.memory_mb > settings.sandbox_max_memory_mb:
        raise ToolFailure("bad_arguments", f"memory_mb may be at most {settings.sandbox_max_memory_mb}")
    limits = Limits(
        timeout_s=args.timeout_s,
        # CPU below wall time, so a busy loop is reported as such rather than as a timeout.
        cpu_s=max(1, math.floor(args.timeout_s * 0.6)),
        memory_mb=args.memory_mb,
        max_output=settings.sandbox_max_output,
    )
    async with rt.code_slots:
        try:
            result = await rt.sandbox.run(args.code, limits, args.files)
        except SandboxUnavailable as exc:
            raise ToolFailure("sandbox_unavailable", str(exc)) from exc
    return result.model_dump()
