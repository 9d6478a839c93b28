"""Markdown and plain text: ATX (`#`) and setext (`===`/`---`) headings start sections; headings
inside fenced code blocks are text."""

from __future__ import annotations

import re

from services.tools_py.parsing.types import ParsedDocument, Section, clean_sections, join_text

_ATX = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)\s*$")


def parse_markdown(text: str, fallback_title: str) -> ParsedDocument:
    sections: list[Section] = []
    heading, level, body = "", 0, []
    in_fence = False
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            in_fence = not in_fence
            body.append(line)
            continue
        if not in_fence:
            atx = _ATX.match(line)
            setext = _SETEXT.match(line) if body and body[-1].strip() and i > 0 else None
            if atx or (setext and not _is_list_or_rule(body[-1])):
                if atx:
                    new_heading, new_level = atx.group(2), len(atx.group(1))
                else:
                    new_heading = body.pop().strip()
                    new_level = 1 if setext and setext.group(1).startswith("=") else 2
                sections.append(Section(heading=heading, level=level, text="\n".join(body)))
                heading, level, body = new_heading, new_level, []
                continue
        body.append(line)
    sections.append(Section(heading=heading, level=level, text="\n".join(body)))
    sections = clean_sections(sections)
    title = next((s.heading for s in sections if s.level == 1 and s.heading), "") or fallback_title
    return ParsedDocument(title=title, format="markdown", text=join_text(sections), sections=sections)


def _is_list_or_rule(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(("-", "*", "+", ">", "|")) or bool(_SETEXT.match(line))


def parse_plain(text: str, fallback_title: str) -> ParsedDocument:
    body = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    sections = clean_sections([Section(heading="", level=0, text=body)])
    first = body.split("\n", 1)[0].strip() if body else ""
    title = fallback_title or (first[:120] if first else "untitled")
    return ParsedDocument(title=title, format="text", text=body, sections=sections)
