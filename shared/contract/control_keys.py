"""Keys of the control KV bucket: what the gateway publishes and every dispatcher (or, for
`mcp.servers`, every tools-go replica) applies.

One definition for both sides, so a key renamed on one side cannot silently stop hot swaps."""

from __future__ import annotations

CHAIN_KEY = "models.chain"  # ModelChain
PRICING_KEY = "pricing"  # Pricing, as the gateway publishes it
# Readers also accept the older `models.pricing` key, which earlier gateways wrote.
PRICING_KEYS = ("models.pricing", PRICING_KEY)
PROMPT_PREFIX = "prompts."  # prompts.<name>: PromptVersion
BREAKER_PREFIX = "breakers."  # breakers.<model>: BreakerState, written by the dispatchers
MCP_SERVERS_KEY = "mcp.servers"  # McpServers, applied by the MCP bridge of every tools-go replica


def prompt_key(name: str) -> str:
    return PROMPT_PREFIX + name
