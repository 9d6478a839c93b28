"""What operators watch: every service instance seen on the heartbeats, readiness, the gateway's
Prometheus metrics and the task counts behind them and the admin overview."""
