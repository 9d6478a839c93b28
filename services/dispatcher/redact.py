"""Streaming redaction of secrets, on the token path (`llm`) and in events (`harness`).

A `StreamRedactor` receives the model's text chunk by chunk and returns only text that can no
longer become part of a secret. It holds back the shortest tail that could still be the start
of (or the still-growing end of) a match — with the `regex` module's partial matching — so a
secret split across any number of chunks never leaks, while ordinary text flows through at once
(a trailing "s" is held until the next chunk shows it is not "sk-…").

Patterns should be "self-delimiting" (a literal prefix and a greedy run), like the defaults.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import regex


@dataclass(frozen=True)
class SecretPattern:
    name: str
    pattern: str
    replacement: str | None = None  # default "[REDACTED:<name>]"

    @property
    def text(self) -> str:
        return self.replacement if self.replacement is not None else f"[REDACTED:{self.name}]"


DEFAULT_PATTERNS: tuple[SecretPattern, ...] = (
    # OpenAI / Anthropic / DeepSeek style keys: sk-…, sk-proj-…, sk-ant-api03-…
    SecretPattern("api_key", r"sk-[A-Za-z0-9_\-]{16,}"),
    SecretPattern("bearer", r"(?i)\bbearer[ \t]+[A-Za-z0-9\-._~+/]{12,}=*", "Bearer [REDACTED:bearer]"),
    SecretPattern("aws_access_key", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"),
    SecretPattern(
        "aws_secret_key",
        r"(?i)aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9/+=]{40,}",
        "aws_secret_access_key=[REDACTED:aws_secret_key]",
    ),
    # A private-key block; an unterminated one is redacted to the end of the text.
    SecretPattern(
        "private_key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    ),
    SecretPattern("github_token", r"\bgh[pousr]_[A-Za-z0-9]{36,}"),
    SecretPattern("slack_token", r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),
    SecretPattern("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}"),
)


def _scoped(pattern: str) -> str:
    """A pattern as one alternative: leading inline flags `(?i)` become scoped `(?i:…)`."""
    m = regex.match(r"\(\?([aiLmsux]+)\)", pattern)
    if m:
        return f"(?{m.group(1)}:{pattern[m.end() :]})"
    return f"(?:{pattern})"


_Found = tuple[regex.Match[str], regex.Pattern[str], SecretPattern]


class Redactor:
    """A compiled set of secret patterns. `extra` adds configured patterns: plain regex strings
    (named `custom`) or SecretPattern objects."""

    def __init__(
        self,
        patterns: Sequence[SecretPattern] = DEFAULT_PATTERNS,
        extra: Iterable[str | SecretPattern] = (),
    ) -> None:
        all_patterns = list(patterns) + [
            p if isinstance(p, SecretPattern) else SecretPattern("custom", p) for p in extra
        ]
        self.patterns = all_patterns
        self._compiled: list[tuple[regex.Pattern[str], SecretPattern]] = []
        for p in all_patterns:
            try:
                compiled = regex.compile(p.pattern)
            except regex.error as exc:
                raise ValueError(f"bad redaction pattern {p.name!r} ({p.pattern!r}): {exc}") from exc
            if compiled.fullmatch(""):
                raise ValueError(f"redaction pattern {p.name!r} matches the empty string")
            self._compiled.append((compiled, p))
        # One alternation of every pattern: a single search tells whether anything in a chunk
        # could be (the start of) a secret, which is the common "no" on the token path.
        try:
            self._any: regex.Pattern[str] | None = regex.compile("|".join(_scoped(p.pattern) for p in all_patterns))
        except regex.error:  # e.g. a pattern with flags in the middle: no fast path, still correct
            self._any = None

    def redact(self, text: str) -> str:
        """Redact a complete text."""
        stream = self.stream()
        return stream.feed(text) + stream.flush()

    def stream(self) -> StreamRedactor:
        return StreamRedactor(self)

    def _leftmost(self, text: str, pos: int, partial: bool) -> _Found | None:
        best: _Found | None = None
        for rx, p in self._compiled:
            m = rx.search(text, pos, partial=partial)
            if m is None or (m.partial and m.start() >= len(text)):
                continue
            if (
                best is None
                or m.start() < best[0].start()
                or (m.start() == best[0].start() and m.end() > best[0].end())
            ):
                best = (m, rx, p)
        return best


# How much of the text already let through stays in view of the next search: a pattern's `\b`
# or lookbehind at the start of the held text must see what came before it, as it would in the
# whole text (without it, "…xBearer abc…" cut before "Bearer" matched the bearer pattern there,
# and that longer match then hid the private key that the whole text's redaction found).
CONTEXT_CHARS = 64


class StreamRedactor:
    """Feed chunks, emit what is safe. `flush()` at the end of the stream releases (redacted)
    whatever is still held."""

    def __init__(self, redactor: Redactor) -> None:
        self._r = redactor
        self._buf = ""  # held: it could still become (part of) a secret
        self._before = ""  # the end of the text before `_buf`, already let through (or redacted)
        self.redactions = 0

    @property
    def held(self) -> int:
        return len(self._buf)

    def feed(self, chunk: str) -> str:
        if not chunk:
            return ""
        text = self._before + self._buf + chunk
        begin = len(self._before)  # searches start here; what precedes is only context
        if self._r._any is not None:
            m = self._r._any.search(text, begin, partial=True)
            if m is None or (m.partial and m.start() >= len(text)):
                return self._let_through(text, len(text), [text[begin:]])
            if m.partial:
                # The leftmost thing that could be a secret runs to the end of what has come:
                # what precedes it is safe, and it is held — as the search below would decide
                # (nothing starts earlier, and no match at its start ends later than the text).
                return self._let_through(text, m.start(), [text[begin : m.start()]])
        out: list[str] = []
        pos = begin
        while True:
            found = self._r._leftmost(text, pos, partial=True)
            if found is None:
                out.append(text[pos:])
                return self._let_through(text, len(text), out)
            m, rx, p = found
            # Hold from the match on when it is unfinished, touches the end (a greedy run may
            # still grow), or the whole tail could still be the prefix of a longer match.
            if m.partial or m.end() >= len(text) or rx.fullmatch(text, m.start(), len(text), partial=True):
                out.append(text[pos : m.start()])
                return self._let_through(text, m.start(), out)
            out.append(text[pos : m.start()])
            out.append(p.text)
            self.redactions += 1
            pos = m.end()

    def _let_through(self, text: str, hold: int, out: list[str]) -> str:
        """`out` goes; `text` from `hold` on is held, with what precedes it kept as context."""
        self._before = text[max(0, hold - CONTEXT_CHARS) : hold]
        self._buf = text[hold:]
        return "".join(out)

    def flush(self) -> str:
        text, pos = self._before + self._buf, len(self._before)
        self._before = self._buf = ""
        out: list[str] = []
        while True:
            found = self._r._leftmost(text, pos, partial=False)
            if found is None:
                out.append(text[pos:])
                return "".join(out)
            m, _, p = found
            out.append(text[pos : m.start()])
            out.append(p.text)
            self.redactions += 1
            pos = m.end()
