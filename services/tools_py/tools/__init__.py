"""Importing this package declares every tools_py tool on the registry."""

from services.tools_py.tools import parse, sandbox

__all__ = ["parse", "sandbox"]
