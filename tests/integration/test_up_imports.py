"""`agentix up` supervises and weighs next to nothing: its start path (parsing, the NATS plan, the
supervisor and its state file, the database prepared in a child, the readiness probe, the banner)
imports nothing of the services and no third-party package at all — only the standard library,
`agentix` and `shared`. The whole life of a real `agentix up` is held to the same in
tests/e2e/test_cli_up.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def foreign_packages(modules: Iterable[str]) -> set[str]:
    """The top-level packages among `modules` that are neither the standard library nor `agentix`
    and `shared` (the hooks an editable install or setuptools put in `site` aside)."""
    tops = {name.split(".")[0] for name in modules}
    own = {"agentix", "shared", "__main__", "_distutils_hack"}
    site_made = ("__editable__", "_sysconfigdata_")
    return {t for t in tops if t not in sys.stdlib_module_names and t not in own and not t.startswith(site_made)}


START_PATH = """
import json, os, sys, threading
from pathlib import Path

from agentix import cluster
from agentix.cli import build_parser
from agentix.supervision_state import state_path
from agentix.supervisor import ChildSpec, Supervisor
from agentix import up

data_dir = Path(sys.argv[1])
args = build_parser().parse_args(["up", "--data-dir", str(data_dir), "--port", "0"])
env = {**os.environ, "AGENTIX_DATA_DIR": str(data_dir)}
nodes = cluster.single_node(data_dir)
specs = cluster.node_specs(nodes, data_dir, env)
env.update(cluster.services_env(nodes))
prepared = up._prepare_database(env)  # the child that migrates and makes the dev admin
assert prepared is not None and prepared["password"] and prepared["token"], prepared
supervisor = Supervisor(state_file=state_path(data_dir))
supervisor.start(ChildSpec("child", [sys.executable, "-c", "import time; time.sleep(30)"], env))
specs += [up.service_spec(name, module, [], env, None) for name, module in up.SERVICES]
assert not cluster.wait_healthy(nodes, timeout_s=0.3)  # nothing listens: the probe says no
assert not up.wait_ready("http://127.0.0.1:9", supervisor, threading.Event(), timeout_s=0.3)
up._banner("http://127.0.0.1:9", data_dir, prepared["password"], prepared["token"])
supervisor.stop()
print(json.dumps(sorted(sys.modules)))
"""


def test_the_start_path_of_up_imports_only_the_standard_library_agentix_and_shared(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIX_")} | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(START_PATH), str(tmp_path / "data")],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    modules = json.loads(done.stdout.strip().splitlines()[-1])
    assert "Agentix is up." in done.stdout
    assert not [m for m in modules if m.split(".")[0] == "services"]
    assert foreign_packages(modules) == set()
