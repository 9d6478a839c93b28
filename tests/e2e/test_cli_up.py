"""`agentix up` tells a newcomer how to log in to the console: on a fresh data dir it creates the
`dev` admin with a generated password and prints it once; later starts say where it came from.
And it only supervises: in its whole life it imports nothing of the services, no third-party
package at all."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.e2e.agentix_up import agentix_up
from tests.integration.test_up_imports import foreign_packages

pytestmark = pytest.mark.e2e


def test_up_prints_a_console_login_that_works(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with agentix_up(data_dir) as up:
        first = list(up.lines)
        assert not any("alembic.runtime.plugins" in line or "Context impl" in line for line in first)
        assert sum("Running upgrade" in line for line in first) >= 1  # what a first start migrates stays said
        login_line = next(line for line in first if "Log in as" in line)
        assert "'dev'" in login_line and any(f"{up.url}/console" in line for line in first)
        password = login_line.split("password ", 1)[1].split()[0]
        login = httpx.post(f"{up.url}/api/v1/auth/login", json={"username": "dev", "password": password}, timeout=10)
        assert login.status_code == 200, login.text
        chain = httpx.get(f"{up.url}/api/v1/admin/models/chain",
                          headers={"Authorization": f"Bearer {login.json()['access_token']}"}, timeout=10)
        assert chain.status_code == 200  # `dev` is an admin

    with agentix_up(data_dir) as again:
        login_line = next(line for line in again.lines if "Log in as" in line)
        assert "printed when this data dir was created" in login_line
        assert password not in again.output  # shown once


def test_up_never_imports_the_services_or_a_third_party_package(tmp_path: Path) -> None:
    """`-X importtime` lists every module the supervisor process imports, from its start through
    a restart of a killed service to the stop (the services it starts do not inherit the flag)."""
    with agentix_up(tmp_path / "data", python_flags=["-X", "importtime"]) as up:
        killed = up.kill("tools-py")
        up.wait_restarted("tools-py", killed)
    imported = [line.rsplit("|", 1)[1].strip() for line in up.lines
                if line.startswith("import time:") and not line.endswith("imported package")]
    # Looked for and not found: `site`'s optional hooks, and Jython's `org.python.core` (by `copy`).
    imported = [name for name in imported if name.split(".")[0] not in ("sitecustomize", "usercustomize", "org")]
    assert "agentix.up" in imported and "agentix.supervisor" in imported
    assert not [name for name in imported if name.split(".")[0] == "services"]
    assert foreign_packages(imported) == set()
