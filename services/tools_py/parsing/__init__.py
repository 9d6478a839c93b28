"""Document parsing: bytes or text of a .txt .md .html .pdf .docx file → title, text, sections."""

from __future__ import annotations

import codecs
from pathlib import PurePosixPath

from services.tools_py.parsing.html import parse_html
from services.tools_py.parsing.markdown import parse_markdown, parse_plain
from services.tools_py.parsing.types import ParsedDocument, ParseError, Section

__all__ = ["FORMATS", "ParseError", "ParsedDocument", "Section", "detect_format", "parse_document"]

FORMATS = ("text", "markdown", "html", "pdf", "docx")
_BY_EXT = {
    ".txt": "text",
    ".text": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".docx": "docx",
}
_BY_TYPE = {
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
}


def detect_format(filename: str | None, media_type: str | None, data: bytes | None) -> str:
    """The media type wins when it is specific; else the extension; else sniff the bytes."""
    mt = (media_type or "").split(";")[0].strip().lower()
    if mt in _BY_TYPE:
        return _BY_TYPE[mt]
    if filename:
        ext = PurePosixPath(filename.lower()).suffix
        if ext in _BY_EXT:
            return _BY_EXT[ext]
        if ext:
            raise ParseError(f"unsupported file type {ext!r}; supported: .txt .md .html .pdf .docx")
    if mt and mt not in ("application/octet-stream", ""):
        raise ParseError(f"unsupported media type {mt!r}")
    if data is not None:
        head = data[:1024].lstrip()
        if head.startswith(b"%PDF-"):
            return "pdf"
        if head.startswith(b"PK\x03\x04"):
            return "docx"
        if head[:15].lower().startswith((b"<!doctype html", b"<html")):
            return "html"
    return "text"


def _decode(data: bytes) -> str:
    for bom, enc in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            return data.decode(enc)
    if b"\x00" in data[:4096]:
        raise ParseError("the file is binary, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def parse_document(
    *, data: bytes | None = None, text: str | None = None, filename: str | None = None, media_type: str | None = None
) -> ParsedDocument:
    if (data is None) == (text is None):
        raise ParseError("give exactly one of the file bytes and the text")
    fmt = detect_format(filename, media_type, data)
    fallback = PurePosixPath(filename).stem if filename else ""
    if fmt in ("pdf", "docx"):
        if data is None:
            raise ParseError(f"a {fmt} document must be sent as bytes, not text")
        result = _parse_binary(fmt, data, fallback)
    else:
        source = text if text is not None else _decode(data or b"")
        if fmt == "html":
            result = parse_html(source, fallback)
        elif fmt == "markdown":
            result = parse_markdown(source, fallback)
        else:
            result = parse_plain(source, fallback)
    if not result.title:
        result.title = "untitled"
    return result


def _parse_binary(fmt: str, data: bytes, fallback: str) -> ParsedDocument:
    # The PDF and Word readers are large: they load with the first such document, not with the service.
    if fmt == "pdf":
        from services.tools_py.parsing.pdf import parse_pdf

        return parse_pdf(data, fallback)
    from services.tools_py.parsing.docx import parse_docx

    return parse_docx(data, fallback)
