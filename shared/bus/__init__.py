"""The NATS layer shared by every service."""

from shared.bus.client import Bus, BusUnavailable, encode

__all__ = ["Bus", "BusUnavailable", "encode"]
