"""Pure ASGI middleware of the gateway, installed by `install_middleware` in the documented order:
recovery → OpenTelemetry → request id → metrics + access log → audit → CORS → body limits →
auth → rate limit → guardrail tier 1."""
