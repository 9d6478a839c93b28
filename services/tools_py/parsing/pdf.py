"""PDF through pypdf: one section per page (page breaks are natural chunk boundaries); the
document info title, else the caller's fallback, is the title."""

from __future__ import annotations

import io
import logging

from pypdf import PdfReader
from pypdf.errors import PyPdfError

from services.tools_py.parsing.types import ParsedDocument, ParseError, Section, clean_sections, join_text

# pypdf logs every malformed object it works around; the caller gets one clear error instead.
logging.getLogger("pypdf").setLevel(logging.ERROR)


def parse_pdf(data: bytes, fallback_title: str) -> ParsedDocument:
    if not data.lstrip()[:5].startswith(b"%PDF-"):
        raise ParseError("not a PDF file (no %PDF- header)")
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise ParseError("the PDF is encrypted with a password")
        pages = [page.extract_text() or "" for page in reader.pages]
        meta_title = (reader.metadata.title if reader.metadata else None) or ""
    except ParseError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, IndexError, AttributeError, OSError) as exc:
        raise ParseError(f"cannot read the PDF: {type(exc).__name__}: {exc}") from exc
    if not pages:
        raise ParseError("the PDF has no pages")
    sections = clean_sections([Section(heading="", level=0, text=t) for t in pages])
    if not any(s.text for s in sections):
        raise ParseError("the PDF has no extractable text (scanned images need OCR)")
    title = str(meta_title).strip() or fallback_title
    return ParsedDocument(title=title, format="pdf", text=join_text(sections), sections=sections)
