"""The tools database (engine, schema)."""

from services.tools_go_equiv.db.engine import Db
from services.tools_go_equiv.db.schema import create_schema

__all__ = ["Db", "create_schema"]
