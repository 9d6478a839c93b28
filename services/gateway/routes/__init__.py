"""HTTP routes (thin: parse, authorize, call a service module, shape the answer)."""
