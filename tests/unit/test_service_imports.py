"""What each service keeps out of its idle memory: libraries only one path needs are imported
with that path's first use, never at start (docs/PERFORMANCE.md, "Memory"). Each check imports a
service's entry module (and builds what its start builds without I/O) in a fresh interpreter and
looks at `sys.modules`: a new top-level import of one of these libraries fails here."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Loaded by every path of a service but these (the reason each is deferred is in the module that
# imports it): report and document formats, the MCP SDK, the openai client, schema migrations,
# cryptography (stored secrets; PyJWT's asymmetric algorithms), numpy (knowledge bases), Redis
# (when configured), httpx (the reranker; it drags its command line's rich and pygments along).
DEFERRED = {
    "services.gateway.__main__": ("alembic", "mako", "pygments", "cryptography", "mcp", "openai", "numpy",
                                  "httpx"),
    "services.dispatcher.main": ("cryptography", "jsonschema", "openai", "mcp", "numpy", "sqlalchemy", "httpx"),
    "services.tools_go_equiv.main": ("numpy", "redis", "httpx", "cryptography", "fpdf", "docx", "pypdf",
                                     "openai", "mcp", "rich", "pygments"),
    "services.tools_py.main": ("pypdf", "docx", "fpdf", "numpy", "cryptography", "httpx", "sqlalchemy"),
}
START = {  # what the start builds beyond imports, without a bus or a database
    "services.gateway.__main__": "from services.gateway import app",
    "services.tools_go_equiv.main": """
        from services.tools_go_equiv.kb.embed import Embedders
        from shared.settings import ToolsGoSettings

        Embedders(ToolsGoSettings())
    """,
}


@pytest.mark.parametrize("module", sorted(DEFERRED))
def test_a_service_starts_without_the_libraries_only_one_path_needs(module: str) -> None:
    code = f"import importlib, json, sys\nimportlib.import_module({module!r})\n"
    code += textwrap.dedent(START.get(module, "")) + "\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    loaded = {name.split(".")[0] for name in json.loads(done.stdout.strip().splitlines()[-1])}
    assert sorted(loaded & set(DEFERRED[module])) == []
