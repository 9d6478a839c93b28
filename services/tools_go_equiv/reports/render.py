"""Report rendering: Markdown → .docx (python-docx) and → .pdf (fpdf2, with a Unicode TrueType
font when the system has one, else the core font with unsupported characters replaced)."""

from __future__ import annotations

import io
from pathlib import Path

from services.tools_go_equiv.reports.markdown import Block, inline_runs, parse_blocks, plain

MEDIA_TYPES = {
    "md": "text/markdown; charset=utf-8",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pdf": "application/pdf",
}
FONT_DIRS = (
    Path("/usr/share/fonts/truetype/dejavu"),
    Path("/usr/share/fonts/dejavu"),
    Path("/usr/local/share/fonts/dejavu"),
    Path("/Library/Fonts"),
)
_FONT_FILES = {
    "": "DejaVuSans.ttf",
    "B": "DejaVuSans-Bold.ttf",
    "I": "DejaVuSans-Oblique.ttf",
    "BI": "DejaVuSans-BoldOblique.ttf",
}
_MONO = "DejaVuSansMono.ttf"


# ---- .docx


def render_docx(title: str, markdown: str) -> bytes:
    from docx import Document  # the writers load with the first report, not with the service

    doc = Document()
    doc.core_properties.title = title
    doc.add_heading(title, level=0)
    for block in parse_blocks(markdown):
        _docx_block(doc, block)
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def _docx_runs(paragraph: object, text: str) -> None:
    for run in inline_runs(text):
        r = paragraph.add_run(run.text)  # type: ignore[attr-defined]
        r.bold = run.bold or None
        r.italic = run.italic or None
        if run.code:
            r.font.name = "Courier New"


def _docx_block(doc: object, block: Block) -> None:
    d = doc  # python-docx Document
    if block.kind == "heading":
        d.add_heading(plain(block.text), level=min(block.level, 9))  # type: ignore[attr-defined]
    elif block.kind == "paragraph":
        _docx_runs(d.add_paragraph(), block.text)  # type: ignore[attr-defined]
    elif block.kind in ("bullets", "numbers"):
        style = "List Bullet" if block.kind == "bullets" else "List Number"
        for item in block.items:
            _docx_runs(d.add_paragraph(style=style), item)  # type: ignore[attr-defined]
    elif block.kind == "code":
        p = d.add_paragraph()  # type: ignore[attr-defined]
        run = p.add_run(block.text)
        run.font.name = "Courier New"
        from docx.shared import Pt

        run.font.size = Pt(9)
    elif block.kind == "quote":
        _docx_runs(d.add_paragraph(style="Quote"), block.text)  # type: ignore[attr-defined]
    elif block.kind == "table" and block.rows:
        width = max(len(r) for r in block.rows)
        table = d.add_table(rows=0, cols=width)  # type: ignore[attr-defined]
        table.style = "Table Grid"
        for i, row in enumerate(block.rows):
            cells = table.add_row().cells
            for j, value in enumerate(row):
                cells[j].text = plain(value)
                if i == 0:
                    for r in cells[j].paragraphs[0].runs:
                        r.bold = True
    elif block.kind == "rule":
        d.add_paragraph("")  # type: ignore[attr-defined]


# ---- .pdf


def _find_fonts() -> tuple[Path, dict[str, Path], Path | None] | None:
    for folder in FONT_DIRS:
        files = {style: folder / name for style, name in _FONT_FILES.items()}
        if all(p.is_file() for p in files.values()):
            mono = folder / _MONO
            return folder, files, mono if mono.is_file() else None
    return None


class _Pdf:
    def __init__(self, title: str) -> None:
        from fpdf import FPDF  # the writers load with the first report, not with the service

        self.pdf = FPDF(format="A4")
        self.pdf.set_title(title)
        self.pdf.set_auto_page_break(auto=True, margin=15)
        self.pdf.add_page()
        fonts = _find_fonts()
        self.unicode = fonts is not None
        if fonts:
            _, files, mono = fonts
            for style, path in files.items():
                self.pdf.add_font("Body", style=style, fname=str(path))
            self.mono = "Mono" if mono else "Body"
            if mono:
                self.pdf.add_font("Mono", fname=str(mono))
            self.body = "Body"
        else:
            self.body, self.mono = "Helvetica", "Courier"

    def safe(self, text: str) -> str:
        return text if self.unicode else text.encode("latin-1", "replace").decode("latin-1")

    def runs(self, text: str, size: float = 11, prefix: str = "") -> None:
        pdf = self.pdf
        line_h = size * 0.5
        if prefix:
            pdf.set_font(self.body, "", size)
            pdf.write(line_h, self.safe(prefix))
        for run in inline_runs(text):
            style = ("B" if run.bold else "") + ("I" if run.italic else "")
            pdf.set_font(self.mono if run.code else self.body, "" if run.code else style, size)
            pdf.write(line_h, self.safe(run.text))
        pdf.ln(line_h + 2)

    def block(self, block: Block) -> None:
        pdf = self.pdf
        if block.kind == "heading":
            size = {1: 18, 2: 15, 3: 13}.get(block.level, 12)
            pdf.ln(2)
            pdf.set_font(self.body, "B", size)
            pdf.multi_cell(0, size * 0.55, self.safe(plain(block.text)), new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1)
        elif block.kind == "paragraph":
            self.runs(block.text)
        elif block.kind in ("bullets", "numbers"):
            bullet = "•" if self.unicode else "-"
            for n, item in enumerate(block.items, start=1):
                self.runs(item, prefix=f"  {bullet} " if block.kind == "bullets" else f"  {n}. ")
        elif block.kind == "code":
            pdf.set_font(self.mono, "", 9)
            pdf.set_fill_color(242, 242, 242)
            pdf.multi_cell(0, 4.5, self.safe(block.text), fill=True, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2)
        elif block.kind == "quote":
            self.runs(block.text, prefix="  | ")
        elif block.kind == "table" and block.rows:
            pdf.set_font(self.body, "", 10)
            width = max(len(r) for r in block.rows)
            with pdf.table() as table:
                for row in block.rows:
                    cells = table.row()
                    for j in range(width):
                        cells.cell(self.safe(plain(row[j])) if j < len(row) else "")
            pdf.ln(2)
        elif block.kind == "rule":
            y = pdf.get_y() + 2
            pdf.line(pdf.l_margin, y, pdf.w - pdf.r_margin, y)
            pdf.ln(5)


def render_pdf(title: str, markdown: str) -> bytes:
    doc = _Pdf(title)
    doc.pdf.set_font(doc.body, "B", 20)
    doc.pdf.multi_cell(0, 10, doc.safe(title), new_x="LMARGIN", new_y="NEXT")
    doc.pdf.ln(3)
    for block in parse_blocks(markdown):
        doc.block(block)
    return bytes(doc.pdf.output())


def render(fmt: str, title: str, markdown: str) -> bytes:
    if fmt == "md":
        return markdown.encode("utf-8")
    if fmt == "docx":
        return render_docx(title, markdown)
    if fmt == "pdf":
        return render_pdf(title, markdown)
    raise ValueError(f"unknown report format {fmt!r}")
