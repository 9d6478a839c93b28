"""The harness around model calls: streaming redaction, tier-2 input guardrail, evaluation."""
