"""What a chat run's agents remember of the conversation: the system prompt, then a running
summary of the older turns, then the newest messages verbatim.

The verbatim part slides: it grows turn by turn until the conversation (with the message being
answered) passes `FOLD_AT` messages; then the oldest ones beyond the last `WINDOW` are *folded*
into the summary by the model, in the run itself (a summarize node before the answer, see
`graphs.py`). A fold reads the previous summary and only the messages that newly left the
window, so nothing is summarised twice, and it happens once per window, not every turn. The
summary is stored on the conversation when the run ends; a fold that failed leaves the stored
summary as it was (the answer went on with the unsummarised messages) and is tried again on the
next turn."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

WINDOW: Final = 16  # the messages a fold leaves verbatim
FOLD_AT: Final = 24  # past this many messages (the new one included), the older ones are folded
SUMMARY_NODE: Final = "summarize"  # the agent that folds
SUMMARY_OUTPUT: Final = "summary"  # the output node that hands its summary to the gateway
SUMMARY_INTRO: Final = "Summary of the earlier conversation:\n"
SUMMARY_SYSTEM: Final = (
    "You keep the running summary of a conversation. Merge the summary so far with the new messages "
    "into one short summary: facts, names, numbers, decisions and open questions the user may come "
    "back to. Answer with the summary only.")

Message = dict[str, Any]


def window(messages: Sequence[Message], size: int = WINDOW) -> list[Message]:
    """The last `size` messages, never starting with a `tool` message whose assistant message
    (the one that called it) fell outside the window."""
    kept = list(messages[-size:]) if size > 0 else []
    while kept and kept[0].get("role") == "tool":
        kept.pop(0)
    return kept


def summary_message(summary: str) -> Message:
    return {"role": "system", "content": SUMMARY_INTRO + summary}


@dataclass
class Memory:
    """A run's memory, as of its turn."""

    summary: str | None  # the stored running summary
    verbatim: list[Message]  # the messages sent as they were said
    folded: list[Message] = field(default_factory=list)  # leaving the window now: a fold is due
    summarized: int = 0  # messages the summary covers once this run's fold is stored

    @property
    def folds(self) -> bool:
        return bool(self.folded)

    def task_input(self) -> dict[str, Any]:
        """The memory part of the run's task input (`history`, and what a fold needs)."""
        before = [summary_message(self.summary)] if self.summary else []
        if not self.folds:
            return {"history": before + self.verbatim}
        return {"history": self.verbatim, "summary": before, "folded": self.folded,
                "fold": {"prompt": fold_prompt(self.summary, self.folded), "summarized": self.summarized}}


def plan(said: Sequence[Message], summary: str | None, summarized: int) -> Memory:
    """The memory of a run whose earlier messages are `said` (oldest first), the stored summary
    covering the first `summarized` of them."""
    summarized = min(summarized, len(said)) if summary else 0
    rest = list(said[summarized:])
    if len(rest) + 1 <= FOLD_AT:
        return Memory(summary or None, rest, summarized=summarized)
    kept = window(rest)
    folded = rest[:len(rest) - len(kept)]
    return Memory(summary or None, kept, folded, summarized + len(folded))


def fold_prompt(summary: str | None, folded: Sequence[Message]) -> str:
    said = "\n".join(f"{m['role']}: {m['content']}" for m in folded)
    return f"Summary so far:\n{summary or '(none yet)'}\n\nNew messages:\n{said}"


def answer_history() -> str:
    """The `history` of a run's agents when it folds: the new summary when the fold succeeded,
    else the stored summary and the messages it was to fold; then the verbatim messages."""
    intro = json.dumps(SUMMARY_INTRO)
    return (f'{{{{ ([{{"role": "system", "content": {intro} ~ {SUMMARY_NODE}}}] if {SUMMARY_NODE} '
            "else input.summary + input.folded) + input.history }}")


def made_summary(task_input: dict[str, Any] | None, output: Any) -> tuple[str, int] | None:
    """The summary a finished run made, with the messages it covers (None when it made none)."""
    fold = (task_input or {}).get("fold")
    text = output.get(SUMMARY_OUTPUT) if isinstance(output, dict) else None
    if not isinstance(fold, dict) or not isinstance(text, str) or not text.strip():
        return None
    return text.strip(), int(fold.get("summarized", 0))
