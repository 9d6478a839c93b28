"""A small Markdown reader for reports: the blocks (headings, paragraphs, lists, code, quotes,
tables, rules) and inline runs (bold, italic, code, links) that renderers turn into .docx/.pdf."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)\s*(\S*)")
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)$")
_NUMBER = re.compile(r"^\s*\d+[.)]\s+(.*)$")
_RULE = re.compile(r"^ {0,3}([-*_])(\s*\1){2,}\s*$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_INLINE = re.compile(
    r"(?P<code>`[^`]+`)|(?P<bold>\*\*[^*]+\*\*|__[^_]+__)|(?P<italic>\*[^*\s][^*]*\*|_[^_\s][^_]*_)"
    r"|(?P<link>\[[^\]]+\]\([^)\s]+\))"
)


@dataclass
class Run:
    text: str
    bold: bool = False
    italic: bool = False
    code: bool = False


@dataclass
class Block:
    kind: str  # heading | paragraph | bullets | numbers | code | quote | table | rule
    text: str = ""
    level: int = 0
    items: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)


def inline_runs(text: str) -> list[Run]:
    runs: list[Run] = []
    pos = 0
    for m in _INLINE.finditer(text):
        if m.start() > pos:
            runs.append(Run(text[pos : m.start()]))
        token = m.group(0)
        if m.group("code"):
            runs.append(Run(token[1:-1], code=True))
        elif m.group("bold"):
            runs.append(Run(token[2:-2], bold=True))
        elif m.group("italic"):
            runs.append(Run(token[1:-1], italic=True))
        else:
            label, url = token[1:].split("](", 1)
            runs.append(Run(f"{label} ({url[:-1]})"))
        pos = m.end()
    if pos < len(text):
        runs.append(Run(text[pos:]))
    return runs


def plain(text: str) -> str:
    return "".join(r.text for r in inline_runs(text))


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_blocks(source: str) -> list[Block]:
    lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks: list[Block] = []
    para: list[str] = []
    i = 0

    def flush() -> None:
        if para:
            blocks.append(Block("paragraph", " ".join(s.strip() for s in para)))
            para.clear()

    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush()
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(fence.group(1)):
                body.append(lines[i])
                i += 1
            blocks.append(Block("code", "\n".join(body)))
            i += 1
            continue
        if not line.strip():
            flush()
        elif m := _HEADING.match(line):
            flush()
            blocks.append(Block("heading", m.group(2), level=len(m.group(1))))
        elif _RULE.match(line):
            flush()
            blocks.append(Block("rule"))
        elif "|" in line and i + 1 < len(lines) and _TABLE_SEP.match(lines[i + 1]):
            flush()
            rows = [_cells(line)]
            i += 2
            while i < len(lines) and "|" in lines[i] and lines[i].strip():
                rows.append(_cells(lines[i]))
                i += 1
            blocks.append(Block("table", rows=rows))
            continue
        elif _BULLET.match(line) or _NUMBER.match(line):
            flush()
            ordered = bool(_NUMBER.match(line)) and not _BULLET.match(line)
            pattern = _NUMBER if ordered else _BULLET
            items: list[str] = []
            while i < len(lines) and (m2 := pattern.match(lines[i])):
                items.append(m2.group(1))
                i += 1
            blocks.append(Block("numbers" if ordered else "bullets", items=items))
            continue
        elif line.lstrip().startswith(">"):
            flush()
            quote: list[str] = []
            while i < len(lines) and lines[i].lstrip().startswith(">"):
                quote.append(lines[i].lstrip()[1:].strip())
                i += 1
            blocks.append(Block("quote", " ".join(quote)))
            continue
        else:
            para.append(line)
        i += 1
    flush()
    return blocks
