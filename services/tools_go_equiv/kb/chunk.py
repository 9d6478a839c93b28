"""Chunking: sections never share a chunk (a heading always starts a new one); inside a section,
paragraphs are packed up to `size` characters, long paragraphs split at sentence then word
boundaries, and each chunk repeats the tail (`overlap` characters, whole words) of the previous
one. Deterministic: the same text and settings give the same chunks, positions included —
which is what makes resumed ingestion idempotent."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_PARA = re.compile(r"\n\s*\n")
_SENTENCE = re.compile(r"(?<=[.!?;:])\s+")


@dataclass(frozen=True)
class Chunk:
    position: int
    heading: str
    text: str

    @property
    def index_text(self) -> str:
        """What gets embedded: the heading path gives the body its context."""
        return f"{self.heading}\n{self.text}" if self.heading else self.text


def _pieces(text: str, size: int) -> list[str]:
    """Paragraphs, with any longer than `size` split at sentences, then words, then hard."""
    out: list[str] = []
    for para in _PARA.split(text):
        para = para.strip()
        if not para:
            continue
        if len(para) <= size:
            out.append(para)
            continue
        for sentence in _SENTENCE.split(para):
            if len(sentence) <= size:
                out.append(sentence)
                continue
            line = ""
            for word in sentence.split():
                while len(word) > size:  # a "word" longer than a chunk: cut it
                    if line:
                        out.append(line)
                        line = ""
                    out.append(word[:size])
                    word = word[size:]
                if line and len(line) + 1 + len(word) > size:
                    out.append(line)
                    line = word
                else:
                    line = f"{line} {word}" if line else word
            if line:
                out.append(line)
    return out


def _tail(text: str, overlap: int) -> str:
    if overlap <= 0 or len(text) <= overlap:
        return "" if overlap <= 0 else text
    cut = text[-overlap:]
    space = cut.find(" ")
    return cut[space + 1 :] if 0 <= space < len(cut) - 1 else cut


def heading_paths(sections: list[dict[str, Any]]) -> list[str]:
    """`Install > Linux` for a level-2 heading under a level-1 one."""
    stack: list[tuple[int, str]] = []
    paths: list[str] = []
    for s in sections:
        heading, level = (s.get("heading") or "").strip(), int(s.get("level") or 0)
        if heading:
            level = level or 1
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading))
            paths.append(" > ".join(h for _, h in stack))
        else:
            paths.append(" > ".join(h for _, h in stack))
    return paths


def chunk_sections(sections: list[dict[str, Any]], size: int = 800, overlap: int = 120) -> list[Chunk]:
    if overlap >= size:
        raise ValueError("chunk overlap must be smaller than the chunk size")
    chunks: list[Chunk] = []
    for section, path in zip(sections, heading_paths(sections), strict=True):
        buf = ""
        fresh = False  # buf holds text not yet emitted (beyond the carried-over overlap)
        for piece in _pieces(section.get("text") or "", size):
            candidate = f"{buf}\n\n{piece}" if buf else piece
            if fresh and len(candidate) > size:
                chunks.append(Chunk(len(chunks), path, buf))
                tail = _tail(buf, overlap)
                candidate = f"{tail}\n\n{piece}" if tail and len(tail) + 2 + len(piece) <= size else piece
            buf, fresh = candidate, True
        if fresh:
            chunks.append(Chunk(len(chunks), path, buf))
    return chunks
