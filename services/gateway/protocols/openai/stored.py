"""A response after `POST /v1/responses`: `GET /v1/responses/{id}` (the response object, or with
`stream=true` its typed events again from the first, or after `starting_after`) and
`POST /v1/responses/{id}/cancel`. A response is its run (`resp_<run id>`), read from the run's
event log like every stream of the run feed; another user's is a 404 as an unknown one."""

from __future__ import annotations

from typing import Final

from sqlmodel import Session

from services.gateway.access.principal import Principal
from services.gateway.db import Database
from services.gateway.problems import ApiProblem
from services.gateway.protocols.openai.responses import ResponseFrames, ResponseRequest
from services.gateway.protocols.openai.start import Started
from services.gateway.protocols.openai.translate import Translator
from services.gateway.runs import submit as tasks
from services.gateway.runs.views import load_owned
from shared.bus import Bus
from shared.contract.task import TERMINAL

PREFIX: Final = "resp_"


def _run_id(response_id: str) -> str:
    if not response_id.startswith(PREFIX) or len(response_id) == len(PREFIX):
        raise ApiProblem(404, "Not Found", f"No response `{response_id}`.", type_="not_found")
    return response_id[len(PREFIX):]


def _owned(session: Session, user: Principal, run_id: str) -> tuple[str, str | None]:
    try:
        task = load_owned(session, user, run_id)
    except ApiProblem as exc:
        raise ApiProblem(404, "Not Found", f"No response `{PREFIX}{run_id}`.", type_="not_found") from exc
    return task.status, task.workflow_id


async def frames_of(db: Database, user: Principal, response_id: str, streamed: bool,
                    starting_after: int | None = None) -> tuple[ResponseFrames, bool]:
    """The response's translator, and whether its run is still going (read live)."""
    run_id = _run_id(response_id)
    status, workflow_id = await db.run(_owned, user, run_id)
    body = ResponseRequest(model=workflow_id or "agentix", input="")
    frames = ResponseFrames(Translator.for_mode(Started(run_id=run_id, conversation_id=None), None),
                            body.model, body, streamed=streamed,
                            starting_after=-1 if starting_after is None else starting_after)
    return frames, status not in TERMINAL


async def cancel(db: Database, bus: Bus, user: Principal, response_id: str) -> None:
    """Cancel the response's run (409 when it has ended)."""
    run_id = _run_id(response_id)
    await db.run(_owned, user, run_id)
    await tasks.cancel(db, bus, user, run_id)
