"""Tracing setup moved to `shared.telemetry` (every service uses it); kept as a re-export."""

from shared.telemetry import setup_tracing

__all__ = ["setup_tracing"]
