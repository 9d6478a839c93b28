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


class StreamRedactor:
    """Feed chunks, emit what is safe. `flush()` at the end of the stream releases (redacted)
    whatever is still held."""

    def __init__(self, redactor: Redactor) -> None:
        self._r = redactor
        self._buf = ""
        self.redactions = 0

    @property
    def held(self) -> int:
        return len(self._buf)

    def feed(self, chunk: str) -> str:
        if not chunk:
            return ""
        buf = self._buf + chunk
        if self._r._any is not None:
            m = self._r._any.search(buf, partial=True)
            if m is None or (m.partial and m.start() >= len(buf)):
                self._buf = ""
                return buf
        out: list[str] = []
        pos = 0
        while True:
            found = self._r._leftmost(buf, pos, partial=True)
            if found is None:
                out.append(buf[pos:])
                buf = ""
                break
            m, rx, p = found
            # Hold from the match on when it is unfinished, touches the end (a greedy run may
            # still grow), or the whole tail could still be the prefix of a longer match.
            if m.partial or m.end() >= len(buf) or rx.fullmatch(buf, m.start(), len(buf), partial=True):
                out.append(buf[pos : m.start()])
                buf = buf[m.start() :]
                break
            out.append(buf[pos : m.start()])
            out.append(p.text)
            self.redactions += 1
            pos = m.end()
        self._buf = buf
        return "".join(out)

    def flush(self) -> str:
        buf, self._buf = self._buf, ""
        out: list[str] = []
        pos = 0
        while True:
            found = self._r._leftmost(buf, pos, partial=False)
            if found is None:
                out.append(buf[pos:])
                return "".join(out)
            m, _, p = found
            out.append(buf[pos : m.start()])
            out.append(p.text)
            self.redactions += 1
            pos = m.end()
