"""Tests use the same embedded-server launcher as `agentix up`."""

from shared.natsd import NatsServer, nats_server_binary

__all__ = ["NatsServer", "nats_server_binary"]
