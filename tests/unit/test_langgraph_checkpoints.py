"""A thread's checkpoints as `/lg` shows them (`protocols/langgraph/checkpoints.chain`, a pure
pass over the thread's runs): the start, each asking turn's question's and its own, an update's
own only, a branch going on from an older turn, a question answered again, a first turn said again."""

from __future__ import annotations

from services.gateway.chat import lineage
from services.gateway.chat.tables import ChatRun
from services.gateway.protocols.langgraph.checkpoints import START, chain, question_id, question_run


def _run(seq: int, run_id: str, follows: str | None = None, again: str | None = None,
         update: bool = False) -> ChatRun:
    return ChatRun(id=run_id, conversation_id="c", seq=seq, mode="direct", follows=follows, answers_again=again,
                   meta={"source": "update"} if update else {})


def _points(runs: list[ChatRun]) -> list[tuple[str, str | None, int]]:
    _, parents = lineage.links_of((r.id, r.follows) for r in runs)
    return [(p.id, p.parent, p.step) for p in chain(runs, parents)]


def test_a_thread_without_turns_has_no_checkpoint() -> None:
    assert chain([], {}) == []


def test_each_asking_turn_has_its_questions_checkpoint_then_its_own() -> None:
    runs = [_run(1, "a"), _run(2, "u", update=True), _run(3, "b")]
    assert _points(runs) == [
        (START, None, -1),
        (question_id("a"), START, 0), ("a", question_id("a"), 1),
        ("u", "a", 2),  # an update's turn ran nothing: its own checkpoint only
        (question_id("b"), "u", 3), ("b", question_id("b"), 4),
    ]


def test_branches_answers_made_again_and_a_first_question_said_again() -> None:
    runs = [_run(1, "a"), _run(2, "b"), _run(3, "b2", follows="a"), _run(4, "b3", follows="a", again="b"),
            _run(5, "a2", follows=lineage.START)]
    points = _points(runs)
    by_id = {point: (parent, step) for point, parent, step in points}
    assert by_id[question_id("b2")] == ("a", 2)  # a branch from the first turn
    assert by_id["b3"] == (question_id("b"), 3)  # beside b's answer, under b's question
    assert question_id("b3") not in by_id
    assert by_id[question_id("a2")] == (START, 0)  # the first question, said again
    assert [p for p, _, _ in points].count(START) == 1


def test_a_question_checkpoint_names_its_run() -> None:
    assert question_run(question_id("t_1")) == "t_1"
    assert question_run("t_1") is None and question_run(None) is None and question_run("-question") is None
