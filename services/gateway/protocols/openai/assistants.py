"""What an OpenAI client may name as its `model`: the assistants of the caller. The built-in chat
agent once per chat mode (`agentix-react`, `agentix-direct`, `agentix-plan`), and each of the
caller's saved workflows whose input is a text (`{"text": …}` passes its input schema), by its
workflow id."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, cast

from sqlmodel import Session, col, select

from services.gateway.access.principal import Principal
from services.gateway.chat.modes import MODES, Mode
from services.gateway.dsl import check_input
from services.gateway.problems import ApiProblem
from services.gateway.tables import Workflow, aware

PREFIX: Final = "agentix-"
OWNER: Final = "agentix"
_PROBE: Final = "text"


@dataclass(frozen=True)
class Assistant:
    id: str
    owned_by: str
    created: int  # Unix seconds, as OpenAI's model objects say it
    mode: Mode | None = None  # a built-in chat agent's mode
    workflow: Workflow | None = None  # or a saved workflow
    takes_history: bool = False  # a workflow whose input schema also accepts `history`

    def model_object(self) -> dict[str, Any]:
        extra = {"mode": self.mode} if self.mode else {"name": self.workflow.name if self.workflow else None}
        return {"id": self.id, "object": "model", "created": self.created, "owned_by": self.owned_by, **extra}


def _unix(stamp: datetime | None) -> int:
    value = aware(stamp)
    return int(value.timestamp()) if value else 0


def _accepts(workflow: Workflow, sample: dict[str, Any]) -> bool:
    try:
        check_input(workflow.dsl, sample)
    except ApiProblem:
        return False
    return True


def _as_assistant(workflow: Workflow) -> Assistant | None:
    if not _accepts(workflow, {"text": _PROBE}):
        return None
    return Assistant(id=workflow.id, owned_by=workflow.user_id, created=_unix(workflow.created_at),
                     workflow=workflow, takes_history=_accepts(workflow, {"text": _PROBE, "history": []}))


def built_in(mode: str) -> Assistant:
    return Assistant(id=PREFIX + mode, owned_by=OWNER, created=0, mode=cast(Mode, mode))


def listing(session: Session, user: Principal) -> list[Assistant]:
    """The built-in agents first, then the caller's own workflows that take a text, oldest first."""
    rows = session.exec(select(Workflow).where(Workflow.user_id == user.id).order_by(col(Workflow.created_at)))
    return [built_in(mode) for mode in MODES] + [a for a in map(_as_assistant, rows) if a is not None]


def resolve(session: Session, user: Principal, model: str) -> Assistant:
    """The assistant named `model` (404 `model_not_found` when the caller has no such one)."""
    if model.startswith(PREFIX) and model[len(PREFIX):] in MODES:
        return built_in(model[len(PREFIX):])
    workflow = session.get(Workflow, model)
    found = _as_assistant(workflow) if workflow is not None and user.can_see(workflow.user_id) else None
    if found is None:
        raise ApiProblem(404, "Not Found", f"The model `{model}` does not exist or you do not have access to it. "
                                           "GET /v1/models lists the ones you may use.", type_="model_not_found")
    return found
