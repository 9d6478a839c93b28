"""A conversation's branches. Each run is a turn that goes on from the turn before it: the run
it `follows`, or else the run with the seq before its own. A run that follows an older run
starts a branch (a LangGraph run or state update from an older checkpoint); the turns it skips
are kept, on the branch they were said on. What a run's model reads is its branch: the turns
from the first one to it, along those links."""

from __future__ import annotations

from collections.abc import Iterable

from sqlmodel import Session, col, select

from services.gateway.chat.tables import ChatRun

Links = dict[str, str | None]  # a run → the run it goes on from (None: the conversation's first turn)
# What a run `follows` when it goes on from no turn at all: a branch from the conversation's start
# (a first turn said again another way: LangGraph's edit or regenerate of it).
START = "__start__"


def links(session: Session, conversation_id: str) -> tuple[list[str], Links]:
    """The conversation's runs in seq order, and what each goes on from."""
    return links_of(session.exec(select(ChatRun.id, ChatRun.follows).where(ChatRun.conversation_id == conversation_id)
                                 .order_by(col(ChatRun.seq))))


def links_of(rows: Iterable[tuple[str, str | None]]) -> tuple[list[str], Links]:
    """`links` of runs read already: each one's `(id, follows)`, in seq order."""
    listed = list(rows)
    order = [run_id for run_id, _ in listed]
    known = set(order)
    parent: Links = {}
    for i, (run_id, follows) in enumerate(listed):
        # A followed run that was removed (its turn rolled back or deleted): go on from the one before.
        parent[run_id] = None if follows == START else follows if follows in known else (order[i - 1] if i else None)
    return order, parent


def branch_of(parent: Links, run_id: str | None) -> list[str]:
    """The runs from the first turn up to `run_id` (itself included), oldest first."""
    out: list[str] = []
    while run_id is not None and run_id not in out:
        out.append(run_id)
        run_id = parent.get(run_id)
    return out[::-1]


def before(session: Session, conversation_id: str, run: ChatRun) -> list[str] | None:
    """The runs before `run` on its branch, oldest first; None when they are all the runs before
    it (the conversation never branched): what was said is then simply every earlier turn."""
    order, parent = links(session, conversation_id)
    earlier = branch_of(parent, run.id)[:-1]
    return None if earlier == order[:order.index(run.id)] else earlier
