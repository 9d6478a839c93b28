"""Who may do what: tokens and passwords, the principal a request acts as, users, and admission
(rate limits and the tier-1 guardrail) — for the API's middleware and every protocol alike."""
