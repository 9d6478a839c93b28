"""Tier-1 guardrail: cheap pattern checks on task input before anything is queued.

`block` patterns are unambiguous prompt-injection phrasings and blocklisted terms; `grey`
patterns are suspicious but legitimate often enough that the dispatcher's tier 2 (a model-based
check) decides. Extra blocklist terms come from `Settings.guardrail_blocklist`
(`AGENTIX_GUARDRAIL_BLOCKLIST`, comma-separated)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from shared.settings import GatewaySettings

BLOCK_PATTERNS: dict[str, str] = {
    "ignore_instructions": r"\b(ignore|disregard|forget|override)\b[\w\s,]{0,40}\b(previous|prior|above|earlier|"
    r"preceding|all|your|system)\b[\w\s]{0,20}\b(instructions?|prompts?|rules|directives|guidelines)\b",
    "reveal_system_prompt": r"\b(reveal|print|show|output|repeat|leak|dump)\b[\w\s]{0,30}\b(system|hidden|initial)"
    r"\s+(prompt|instructions?|message)\b",
    "dan_jailbreak": r"\b(you are|act as|you're) (now )?(DAN|an? unrestricted|an? unfiltered|jailbroken)\b",
    "fake_system_tag": r"(<\|?(im_start|system)\|?>|\[/?(SYSTEM|INST)\]|###\s*system\s*:)",
}
GREY_PATTERNS: dict[str, str] = {
    "roleplay_override": r"\b(pretend (to be|you are)|from now on you (are|will)|developer mode)\b",
    "prompt_probe": r"\b(system prompt|your instructions|your rules)\b",
    "jailbreak_word": r"\bjailbreak\w*\b",
    "encoded_payload": r"[A-Za-z0-9+/]{120,}={0,2}",
}
DEFAULT_BLOCKLIST: tuple[str, ...] = ()
MAX_SCAN_CHARS = 200_000  # the body is ≤ 1 MiB; this bounds regex time per request

Action = Literal["allow", "flag", "block"]


@dataclass(frozen=True)
class Verdict:
    action: Action
    rules: list[str] = field(default_factory=list)

    @property
    def reason(self) -> str:
        return "matched " + ", ".join(self.rules) if self.rules else "clean"


class Guardrail:
    def __init__(self, blocklist: Iterable[str] = ()) -> None:
        self._block = {name: re.compile(p, re.IGNORECASE) for name, p in BLOCK_PATTERNS.items()}
        self._grey = {name: re.compile(p, re.IGNORECASE) for name, p in GREY_PATTERNS.items()}
        terms = [t.strip().lower() for t in blocklist if t.strip()]
        self._blocklist = re.compile(r"\b(" + "|".join(re.escape(t) for t in terms) + r")\b", re.I) if terms else None

    @classmethod
    def from_settings(cls, settings: GatewaySettings) -> Guardrail:
        return cls([*DEFAULT_BLOCKLIST, *settings.guardrail_blocklist])

    def check(self, texts: Iterable[str]) -> Verdict:
        text = "\n".join(texts)[:MAX_SCAN_CHARS]
        if not text:
            return Verdict("allow")
        blocked = [name for name, rx in self._block.items() if rx.search(text)]
        if self._blocklist is not None and self._blocklist.search(text):
            blocked.append("blocklist")
        if blocked:
            return Verdict("block", blocked)
        grey = [name for name, rx in self._grey.items() if rx.search(text)]
        return Verdict("flag", grey) if grey else Verdict("allow")


def strings_in(value: Any) -> Iterator[str]:
    """Every string (keys included) inside a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from strings_in(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_in(v)
