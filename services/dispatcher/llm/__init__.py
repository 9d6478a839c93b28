"""The model layer: one model, the failover chain over several, breakers, cache, budgets, the
offline model. The engine depends only on `api.py`; `pool.ModelPool` builds what implements it
(the ReAct loop, which also calls tools, is the engine's: `engine/react.py`)."""
