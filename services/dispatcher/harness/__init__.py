"""The harness around model calls: tier-2 input guardrail, evaluation, event redaction.
(The streaming redactor itself is `services.dispatcher.redact`, below both `llm` and `harness`.)"""
