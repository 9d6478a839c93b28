"""LangGraph's `recursion_limit` (a run's `config`, an assistant's): the steps a run may take
before LangGraph stops it. A chat run takes at most `RUN_MAX_STEPS` of them as LangGraph counts
them (each tool round a model step and a tool step, then the answer; a plan and its approval
before them) and is never stopped sooner, so a limit at least that high holds for every run; a
lower one, at which a LangGraph server would stop the run, is refused."""

from __future__ import annotations

from typing import Any, Final

from services.gateway.chat.modes import REACT_MAX_STEPS

RUN_MAX_STEPS: Final = 2 * REACT_MAX_STEPS + 4


def why_not(limit: Any) -> str | None:
    """Why `limit` cannot be held (None: it holds for every run)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < RUN_MAX_STEPS:
        return (f"a chat run takes up to {RUN_MAX_STEPS} steps as LangGraph counts them and is not stopped "
                f"sooner: a limit of at least {RUN_MAX_STEPS} holds for every run")
    return None
