"""How a run's `command.resume` is read: the answer to the approval the thread waits for, in
each form LangGraph clients send it."""

from __future__ import annotations

from typing import Any, Final

from services.gateway.chat import runs as chat_runs
from services.gateway.problems import ApiProblem

_APPROVE: Final = ("approve", "approved", "yes", "accept", "continue")
_REJECT: Final = ("reject", "rejected", "no", "deny", "cancel")


def decision_of(resume: Any) -> chat_runs.RunApproval:
    """An approval's answer: `"approve"`/`true`, `"reject"`/`false`, `{decision, comment?}`, or the
    LangChain v1 human-in-the-loop middleware's `{decisions: [{type: approve|edit|reject,
    edited_action?: {name, args}, message?}]}` (`edit`: approve the tool call with `args`)."""
    comment: str | None = None
    args: dict[str, Any] | None = None
    if isinstance(resume, dict) and "decisions" in resume:
        resume = _one_decision(resume["decisions"])
        if resume.get("type") == "edit":
            args = _edited_args(resume.get("edited_action"))
            resume = {**resume, "type": "approve"}
    if isinstance(resume, dict):
        said = resume.get("comment", resume.get("message"))
        comment = said if isinstance(said, str) else None
        resume = resume.get("decision", resume.get("type"))
    if resume is True or (isinstance(resume, str) and resume.lower() in _APPROVE):
        return chat_runs.RunApproval(decision="approve", comment=comment, args=args)
    if resume is False or (isinstance(resume, str) and resume.lower() in _REJECT):
        return chat_runs.RunApproval(decision="reject", comment=comment)
    raise ApiProblem(422, "Invalid request", "command.resume answers an approval: \"approve\" | \"reject\" | true | "
                                             "false | {\"decision\": …, \"comment\"?: …} | {\"decisions\": [{\"type\": "
                                             "\"approve\" | \"edit\" | \"reject\", \"edited_action\"?: {name, args}, "
                                             "\"message\"?: …}]}.")


def _invalid(field: str, message: str) -> ApiProblem:
    return ApiProblem(422, "Invalid request", f"{field}: {message}.",
                      errors=[{"code": "invalid", "field": field, "message": message}])


def _edited_args(action: Any) -> dict[str, Any]:
    args = action.get("args") if isinstance(action, dict) else None
    if not isinstance(args, dict):
        raise _invalid("command.resume.decisions[0].edited_action", "an edit is `{name, args: {…}}`")
    return args


def _one_decision(decisions: Any) -> dict[str, Any]:
    if not isinstance(decisions, list) or len(decisions) != 1 or not isinstance(decisions[0], dict):
        raise _invalid("command.resume.decisions", "one decision for the one action the interrupt asks about")
    decision: dict[str, Any] = decisions[0]
    if decision.get("type") not in ("approve", "edit", "reject"):
        raise ApiProblem(422, "Invalid request", f"`command.resume.decisions[0].type: {decision.get('type')}` is not "
                                                 "supported: an Agentix approval is approved, edited or rejected.",
                         errors=[{"code": "unsupported", "field": "command.resume.decisions[0].type",
                                  "message": str(decision.get("type"))}])
    return decision
