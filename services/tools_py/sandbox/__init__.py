"""The code sandbox: `runner.Sandbox` starts the shared launcher (`shared/sandbox`), which isolates
and runs the code."""

from services.tools_py.sandbox.runner import Limits, RunResult, Sandbox, SandboxUnavailable

__all__ = ["Limits", "RunResult", "Sandbox", "SandboxUnavailable"]
