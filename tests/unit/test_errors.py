"""Every exception class the code base defines is either a described failure (an `AgentixError`,
with its own code) or named here as control flow. A new exception class that is neither fails
this test, so "catching AgentixError means a failure we can describe" stays true."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from services.gateway.problems import ApiProblem
from services.tools_go_equiv.kb.store import DocumentGone
from shared.contract.templates import TemplateProblem
from shared.errors import AgentixError

ROOTS = ("shared", "services", "agentix")
# Not importable as modules: scripts that run on import (inside the sandbox's chroot, under
# alembic, as a process entry point).
SCRIPTS = ("services.tools_py.sandbox.prelude", "shared.sandbox.launcher", "services.gateway.migrations")

# Exceptions that steer one module's own flow and never leave it: not failures.
CONTROL_FLOW = {
    "services.dispatcher.engine.outcome.Stop": "ends a run with its terminal status inside the engine",
    "services.dispatcher.llm.api.ToolApprovalNeeded": "parks an agent node until its high-risk tool call is decided",
    "services.gateway.runs.submit._KeyTaken": "sends a racing submission to the winner's task inside runs/submit.py",
    "shared.startup.StoppedWhileStarting": "ends a service stopped before it served (its process exits 0)",
}
# Their code is chosen per instance (a problem's type, a model's or a tool's failure code), not per class.
CODE_PER_INSTANCE = {
    "services.gateway.problems.ApiProblem",
    "services.dispatcher.engine.compile.CompileError",
    "services.dispatcher.engine.context.NodeError",
    "services.dispatcher.llm.api.LLMError",
    "services.dispatcher.llm.errors.AttemptError",
    "services.dispatcher.llm.model.ModelFailed",
    "shared.bus.tools.ToolFailure",
}


def _defined_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for root in ROOTS:
        package = importlib.import_module(root)
        for info in pkgutil.walk_packages(package.__path__, f"{root}."):
            if info.name.startswith(SCRIPTS) or info.name.endswith(".__main__"):
                continue
            module = importlib.import_module(info.name)
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if cls.__module__ == info.name and issubclass(cls, BaseException):
                    found[f"{info.name}.{cls.__qualname__}"] = cls
    return found


EXCEPTIONS = _defined_exceptions()
DESCRIBED = sorted(set(EXCEPTIONS) - set(CONTROL_FLOW) - {"shared.errors.AgentixError"})


def test_the_scan_sees_the_code_base() -> None:
    assert "shared.errors.AgentixError" in EXCEPTIONS
    assert {"services.tools_py.parsing.types.ParseError", "shared.secrets.SecretError"} <= set(DESCRIBED)


@pytest.mark.parametrize("name", DESCRIBED)
def test_a_described_failure_is_an_agentix_error_with_its_own_code(name: str) -> None:
    cls = EXCEPTIONS[name]
    assert issubclass(cls, AgentixError), f"{name} should derive from AgentixError (or be listed as control flow)"
    if name not in CODE_PER_INSTANCE:
        assert cls.code != AgentixError.code, f"{name} should name its own code"
    assert 400 <= cls.http_status < 600


@pytest.mark.parametrize("name", sorted(CONTROL_FLOW))
def test_the_control_flow_list_names_classes_that_exist_and_are_not_failures(name: str) -> None:
    assert name in EXCEPTIONS, f"{name} is gone: drop it from this test's lists"
    assert not issubclass(EXCEPTIONS[name], AgentixError), f"{name} is an AgentixError: a failure"


@pytest.mark.parametrize(
    ("name", "kept_base"),
    [
        ("services.tools_py.parsing.types.ParseError", ValueError),
        ("shared.secrets.SecretError", ValueError),
        ("shared.auth_tokens.InvalidToken", ValueError),
        ("services.tools_py.sandbox.runner.SandboxUnavailable", RuntimeError),
        ("services.tools_go_equiv.kb.embed.EmbedderUnavailable", RuntimeError),
        ("services.gateway.schema_version.SchemaMismatch", RuntimeError),
    ],
)
def test_callers_catching_the_old_base_still_catch_it(name: str, kept_base: type[Exception]) -> None:
    assert issubclass(EXCEPTIONS[name], kept_base)


def test_constructors_and_messages_are_unchanged() -> None:
    gone = DocumentGone("doc_1")
    assert (str(gone), gone.message, gone.code, gone.http_status) == ("doc_1", "doc_1", "not_found", 404)

    problem = TemplateProblem("empty expression", source="{{ }}", node_id="n1", field="config.text")
    assert str(problem) == "node 'n1' config.text: empty expression in '{{ }}'"
    assert (problem.message, problem.code) == ("empty expression", "bad_template")

    api = ApiProblem(409, "Conflict", "the key is taken", headers={"Retry-After": "1"})
    assert (str(api), api.status, api.http_status, api.type, api.code) == (
        "the key is taken", 409, 409, "conflict", "conflict"
    )
    assert api.headers == {"Retry-After": "1"}
