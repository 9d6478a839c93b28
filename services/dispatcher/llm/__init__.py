"""The model layer: pool, failover chain, breakers, cache, budgets, offline model, ReAct.
The engine depends only on `api.py`; `pool.ModelPool` and `react.ReactAgent` implement it."""
