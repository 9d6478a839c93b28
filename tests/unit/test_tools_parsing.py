"""doc_parse's parsers on real files: Markdown, HTML, PDF (made with fpdf2), DOCX (made with
python-docx), and the clear errors for bad input."""

from __future__ import annotations

import io

import docx
import pytest
from fpdf import FPDF

from services.tools_py.parsing import ParseError, detect_format, parse_document


def make_pdf(pages: list[str], title: str = "") -> bytes:
    pdf = FPDF()
    if title:
        pdf.set_title(title)
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    return bytes(pdf.output())


def make_docx() -> bytes:
    doc = docx.Document()
    doc.add_paragraph("Handbook", style="Title")
    doc.add_paragraph("Opening words.")
    doc.add_heading("Travel", level=1)
    doc.add_paragraph("Book trains for short trips.")
    doc.add_heading("Hotels", level=2)
    table = doc.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "City", "Limit"
    table.cell(1, 0).text, table.cell(1, 1).text = "Berlin", "120"
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def test_markdown_sections_follow_headings_but_not_inside_code() -> None:
    source = "# Guide\nintro\n\n## Install\nrun it\n```\n# not a heading\n```\nSetup\n-----\nmore"
    doc = parse_document(text=source, filename="guide.md")
    assert doc.title == "Guide" and doc.format == "markdown"
    assert [(s.heading, s.level) for s in doc.sections] == [("Guide", 1), ("Install", 2), ("Setup", 2)]
    assert "# not a heading" in doc.sections[1].text
    assert doc.sections[2].text == "more"


def test_plain_text_is_one_section_titled_by_file_name() -> None:
    doc = parse_document(data=b"line one\nline two", filename="notes.txt")
    assert doc.title == "notes" and doc.format == "text"
    assert doc.sections[0].text == "line one\nline two"


def test_html_drops_scripts_and_splits_on_headings() -> None:
    page = (
        b"<html><head><title>Policies</title><style>p{}</style></head><body>"
        b"<h1>Vacation</h1><p>25 <b>days</b> a year.</p><script>alert(1)</script>"
        b"<h2>Carry over</h2><ul><li>five days</li><li>until March</li></ul></body></html>"
    )
    doc = parse_document(data=page, filename="p.html")
    assert doc.title == "Policies"
    assert [s.heading for s in doc.sections] == ["Vacation", "Carry over"]
    assert doc.sections[0].text == "25 days a year."
    assert "alert" not in doc.text and "p{}" not in doc.text
    assert "five days" in doc.sections[1].text and "until March" in doc.sections[1].text


def test_pdf_pages_become_sections_with_metadata_title() -> None:
    data = make_pdf(["The first page talks about JetStream.", "The second page about Redis."], title="Infra")
    doc = parse_document(data=data, filename="infra.pdf")
    assert doc.title == "Infra" and doc.format == "pdf"
    assert len(doc.sections) == 2
    assert "JetStream" in doc.sections[0].text and "Redis" in doc.sections[1].text


def test_docx_headings_tables_and_title() -> None:
    doc = parse_document(data=make_docx(), filename="h.docx")
    assert doc.title == "Handbook"
    assert [s.heading for s in doc.sections] == ["", "Travel", "Hotels"]
    assert doc.sections[0].text == "Opening words."
    assert "Berlin | 120" in doc.sections[2].text


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"data": b"%PDF-1.4\nthis is not really a pdf", "filename": "x.pdf"}, "PDF"),
        ({"data": b"plain words", "filename": "x.pdf"}, "not a PDF"),
        ({"data": b"PK\x03\x04garbage", "filename": "x.docx"}, ".docx"),
        ({"data": b"MZ\x00\x00", "filename": "tool.exe"}, "unsupported file type"),
        ({"data": b"\x00\x01\x02" * 100, "filename": None}, "binary"),
        ({"text": "hello", "filename": "x.pdf"}, "bytes"),
    ],
)
def test_bad_documents_fail_with_a_clear_reason(kwargs: dict, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_document(**kwargs)


def test_format_detection_prefers_media_type_then_extension_then_bytes() -> None:
    assert detect_format("a.txt", "text/html", None) == "html"
    assert detect_format("a.md", None, None) == "markdown"
    assert detect_format(None, None, b"%PDF-1.7 ...") == "pdf"
    assert detect_format(None, "application/octet-stream", b"<!DOCTYPE html><html>") == "html"
