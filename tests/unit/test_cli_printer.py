"""`agentix run` prints streamed text a whole line at a time, per node: parallel agents' tokens
no longer interleave fragment by fragment."""

from __future__ import annotations

import io

from agentix.printer import Printer


def _printed(events: list[tuple[str, dict]]) -> list[str]:
    out = io.StringIO()
    printer = Printer(quiet=False, stream=out)
    for name, data in events:
        printer.show(name, data)
    printer.flush()
    return out.getvalue().splitlines()


def test_parallel_tokens_come_out_as_whole_lines_per_node() -> None:
    fragments = [("facts", "key "), ("risks", "could "), ("facts", "facts\nsecond"), ("risks", "fail\n"),
                 ("facts", " line\n")]
    lines = _printed([("token", {"node_id": n, "text": t}) for n, t in fragments])
    assert lines == ["  [facts] key facts", "  [risks] could fail", "  [facts] second line"]


def test_a_node_end_prints_the_rest_of_its_line_first() -> None:
    lines = _printed([
        ("token", {"node_id": "a", "text": "partial"}),
        ("token", {"node_id": "b", "text": "other"}),
        ("node.end", {"node_id": "a", "status": "done", "duration_ms": 3}),
        ("status", {"status": "done"}),
    ])
    assert lines == ["  [a] partial", "✓ a 3 ms", "  [b] other", "● done"]
