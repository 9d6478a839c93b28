"""HTML with the standard library's parser: scripts/styles dropped, block elements become line
breaks, `<h1>`–`<h6>` start sections, `<title>` (else the first `<h1>`) is the title."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from services.tools_py.parsing.types import ParsedDocument, Section, clean_sections, join_text

_SKIP = {"script", "style", "noscript", "template", "svg", "head"}
_BLOCK = {
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "tr",
    "table",
    "section",
    "article",
    "header",
    "footer",
    "blockquote",
    "pre",
    "hr",
    "dd",
    "dt",
    "dl",
    "figure",
    "figcaption",
    "main",
    "nav",
    "aside",
}
_HEADINGS = {f"h{i}": i for i in range(1, 7)}


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title = ""
        self.sections: list[Section] = []
        self._heading, self._level = "", 0
        self._buf: list[str] = []
        self._skip_depth = 0
        self._in_title = False
        self._in_heading: int | None = None
        self._heading_buf: list[str] = []
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in _SKIP:
            self._skip_depth += 1
        elif tag in _HEADINGS:
            self._in_heading = _HEADINGS[tag]
            self._heading_buf = []
        elif tag == "pre":
            self._pre += 1
            self._buf.append("\n")
        elif tag in _BLOCK:
            self._buf.append("\n")
        elif tag in ("td", "th"):
            self._buf.append(" | ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in _SKIP:
            self._skip_depth = max(0, self._skip_depth - 1)
        elif tag in _HEADINGS and self._in_heading is not None:
            text = " ".join("".join(self._heading_buf).split())
            self._flush()
            self._heading, self._level = text, self._in_heading
            self._in_heading = None
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
            self._buf.append("\n")
        elif tag in _BLOCK:
            self._buf.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif self._skip_depth:
            return
        elif self._in_heading is not None:
            self._heading_buf.append(data)
        else:
            self._buf.append(data if self._pre else re.sub(r"[ \t\r\n]+", " ", data))

    def _flush(self) -> None:
        text = "".join(self._buf)
        lines = [ln.strip() for ln in text.split("\n")]
        body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
        self.sections.append(Section(heading=self._heading, level=self._level, text=body))
        self._buf = []

    def finish(self) -> None:
        self.close()
        self._flush()


def parse_html(source: str, fallback_title: str) -> ParsedDocument:
    collector = _Collector()
    collector.feed(source)
    collector.finish()
    sections = clean_sections(collector.sections)
    title = " ".join(collector.title.split())
    if not title:
        title = next((s.heading for s in sections if s.level == 1 and s.heading), "") or fallback_title
    return ParsedDocument(title=title, format="html", text=join_text(sections), sections=sections)
