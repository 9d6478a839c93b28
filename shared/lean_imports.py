"""Libraries imported without an optional extra they would load because it happens to be
installed, when Agentix never uses what that extra is for:

- nats-py imports aiohttp (for a websocket transport to NATS, which Agentix never uses), ~11 MB
  resident. aiohttp is installed for the dispatcher's model client alone, so every service loads
  nats-py with aiohttp hidden from it (`services/__init__.py`, which every service process
  imports before any of its modules imports nats).
- PyJWT imports cryptography (for the asymmetric algorithms; Agentix signs HS256, which needs
  only the standard library's hmac), ~10 MB resident (`shared/auth_tokens.py`).

A process that imports the extra itself later (the dispatcher's aiohttp, `shared.secrets`'
cryptography) gets the real module: only the library's one look at import is refused."""

from __future__ import annotations

import importlib
import sys


def import_without(module: str, *extras: str) -> None:
    """Import `module` with `import <extra>` failing inside it (idempotent): a no-op when the
    module is imported already (too late) or an extra is (it is wanted anyway)."""
    if module in sys.modules or any(extra in sys.modules for extra in extras):
        return
    for extra in extras:
        sys.modules[extra] = None  # type: ignore[assignment]  # makes `import <extra>` raise ImportError
    try:
        importlib.import_module(module)
    finally:
        for extra in extras:
            del sys.modules[extra]
