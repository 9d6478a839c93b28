"""Admin services: model configs, the failover chain, pricing, prompts, status."""
