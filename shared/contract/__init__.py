"""Data contracts spoken across every service boundary. Pure pydantic: no I/O in this package."""
