"""Word documents through python-docx: paragraphs styled `Heading N`/`Title` start sections,
table rows become ` | `-joined lines, in document order."""

from __future__ import annotations

import io
import re
import zipfile

from docx import Document
from docx.opc.exceptions import PackageNotFoundError
from docx.table import Table
from docx.text.paragraph import Paragraph

from services.tools_py.parsing.types import ParsedDocument, ParseError, Section, clean_sections, join_text

_HEADING = re.compile(r"^heading\s*(\d)$", re.I)


def parse_docx(data: bytes, fallback_title: str) -> ParsedDocument:
    try:
        doc = Document(io.BytesIO(data))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise ParseError(f"cannot read the .docx file: {type(exc).__name__}: {exc}") from exc
    sections: list[Section] = []
    heading, level, body = "", 0, []
    styled_title = ""
    for block in doc.iter_inner_content():
        if isinstance(block, Table):
            for row in block.rows:
                cells = [c.text.strip() for c in row.cells]
                body.append(" | ".join(cells))
            continue
        para: Paragraph = block
        text = para.text.strip()
        style = (para.style.name if para.style is not None else "") or ""
        match = _HEADING.match(style)
        if style.lower() == "title" and text:
            styled_title = styled_title or text
            continue
        if match and text:
            sections.append(Section(heading=heading, level=level, text="\n".join(body)))
            heading, level, body = text, int(match.group(1)), []
            continue
        if text:
            body.append(text)
    sections.append(Section(heading=heading, level=level, text="\n".join(body)))
    sections = clean_sections(sections)
    title = (
        (doc.core_properties.title or "").strip()
        or styled_title
        or next((s.heading for s in sections if s.level == 1 and s.heading), "")
        or fallback_title
    )
    return ParsedDocument(title=title, format="docx", text=join_text(sections), sections=sections)
