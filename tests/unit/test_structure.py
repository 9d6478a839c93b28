"""The house rules that keep the code base easy to change, checked on the source itself:
no import cycle between the project's modules, and no module over 450 lines. A change that
breaks either fails here, naming the modules, instead of waiting for a reviewer to notice."""

from __future__ import annotations

import ast
from pathlib import Path

from shared.contract.cycles import cycles

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("services", "shared", "agentix")
MAX_LINES = 450


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imported(name: str, path: Path) -> set[str]:
    """The project modules `name` imports, at any depth of its body (a lazy import inside a
    function closes a cycle as surely as one at the top, only later)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                # `from pkg import mod` imports the module pkg.mod; `from mod import name`, mod.
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return {target for target in targets if target in MODULES and target != name}


def test_the_scan_sees_the_code_base_and_its_imports() -> None:
    graph = {name: _imported(name, path) for name, path in MODULES.items()}
    assert "services.dispatcher.worker" in graph
    assert "shared.bus.workqueue" in graph["services.dispatcher.worker"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert [sorted(c) for c in cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})] == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_the_projects_modules() -> None:
    graph = {name: _imported(name, path) for name, path in MODULES.items()}
    assert [sorted(component) for component in cycles(graph, sorted(graph))] == []


def test_no_module_is_over_450_lines() -> None:
    too_long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert too_long == {}
