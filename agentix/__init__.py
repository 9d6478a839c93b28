"""The `agentix` command: the composition root that starts and drives the services."""
