"""A thread's checkpoints as LangGraph makes them: a turn that asks the model has two, its
question's (the branch's messages and the question, `next: [answer]`) and then its own (with the
answer, or where it stands while it goes or waits; its id is the run's). A turn that ran nothing
(an update's) has only its own.

The question's checkpoint is what a LangGraph UI regenerates an answer from: a run from it with no
input answers the same question again, beside the first answer (a fork at the question, as
LangGraph's is). That run's own question is a copy of the first (`ChatRun.answers_again`), so the
model reads its branch as any turn's; history shows it under the first question's checkpoint.

Every thread that has a turn starts at `__start__`, its empty state (LangGraph's input checkpoint):
a run from it edits the first question, on a branch of its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from sqlmodel import Session, col, select

from services.gateway.chat import lineage
from services.gateway.chat.tables import ChatMessage, ChatRun
from services.gateway.problems import ApiProblem
from services.gateway.protocols.langgraph import messages, threads

QUESTION_SUFFIX: Final = "-question"
START: Final = lineage.START  # the id of the thread's start, its empty state before its first turn


def question_id(run_id: str) -> str:
    """The id of the checkpoint of `run_id`'s question."""
    return f"{run_id}{QUESTION_SUFFIX}"


def question_run(checkpoint_id: str | None) -> str | None:
    """The run whose question's checkpoint this is (None: it is a turn's own, or none)."""
    if checkpoint_id is None or not checkpoint_id.endswith(QUESTION_SUFFIX):
        return None
    return checkpoint_id[:-len(QUESTION_SUFFIX)] or None


@dataclass(frozen=True, slots=True)
class Checkpoint:
    id: str
    run: ChatRun | None  # None: the thread's start
    question: bool  # the question's checkpoint (the answer next) rather than the turn's own
    parent: str | None
    step: int  # its depth on its branch: -1 for the start, one more for each checkpoint after it


def asks(run: ChatRun) -> bool:
    """Whether the run asked the model a question: every turn does but an update's, which adds
    messages and runs nothing (`metadata.source: "update"`: update_state, `command.update`)."""
    return (run.meta or {}).get("source") != "update"


def chain(runs: list[ChatRun], parents: lineage.Links) -> list[Checkpoint]:
    """Every checkpoint of `runs` (in seq order), in the order they were made: each turn's
    question's before its own, which goes on from it (from the first question's, for a run that
    answers a question again)."""
    if not runs:
        return []
    start = Checkpoint(START, None, False, None, -1)
    own: dict[str, Checkpoint] = {}
    questions: dict[str, Checkpoint] = {}
    out: list[Checkpoint] = [start]
    for run in runs:
        follows = parents.get(run.id)
        base = own.get(follows, start) if follows is not None else start
        before = questions.get(run.answers_again) if run.answers_again else None
        if before is None and asks(run):
            before = questions[run.id] = Checkpoint(question_id(run.id), run, True, base.id, base.step + 1)
            out.append(before)
        before = before or base
        own[run.id] = Checkpoint(run.id, run, False, before.id, before.step + 1)
        out.append(own[run.id])
    return out


def of_thread(session: Session, thread_id: str) -> tuple[list[Checkpoint], lineage.Links]:
    """The thread's checkpoints (`chain`), and what each of its runs goes on from."""
    runs = list(session.exec(select(ChatRun).where(ChatRun.conversation_id == thread_id).order_by(col(ChatRun.seq))))
    _, parents = lineage.links_of((run.id, run.follows) for run in runs)
    return chain(runs, parents), parents


def asked_state(session: Session, run: ChatRun, parents: lineage.Links) -> list[dict[str, Any]]:
    """The messages at `run`'s question's checkpoint: its branch's before it, then its question."""
    branch = lineage.branch_of(parents, run.id)
    said = threads.history(session, run.conversation_id, before_seq=run.seq, runs=branch[:-1])
    question = session.exec(select(ChatMessage).where(ChatMessage.run_id == run.id, ChatMessage.role == "user")
                            .order_by(col(ChatMessage.id))).first()
    if question is not None:
        said.append(messages.from_row(question))
    return said


def not_found(thread_id: str, checkpoint_id: str) -> ApiProblem:
    return ApiProblem(404, "Not Found", f"Thread {thread_id!r} has no checkpoint {checkpoint_id!r}.")
