"""Office files the tests generate themselves (nothing binary is committed)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

VTT = """WEBVTT

00:02:05.000 --> 00:02:11.900
<v Mette>Welcome to the quarterly planning call.

00:02:12.400 --> 00:02:18.250
<v Jonas>The data retention period for audit logs is eighteen months.

00:02:18.500 --> 00:02:24.000
<v Mette>Good, and backups are restored as a drill every quarter.
"""


def pdf_bytes(pages: list[str], *, encrypt: bool = False, restrict: bool = False) -> bytes:
    """``encrypt``: a password opens it. ``restrict``: AES-256 with an owner password only, as
    "restrict editing" leaves a PDF: every reader opens it without asking."""
    from fpdf import FPDF
    from fpdf.enums import EncryptionMethod

    pdf = FPDF()
    pdf.set_title("Travel Policy")
    if encrypt:
        pdf.set_encryption(owner_password="owner", user_password="secret")
    if restrict:
        pdf.set_encryption(owner_password="owner", encryption_method=EncryptionMethod.AES_256)
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    return bytes(pdf.output())


ROOMS = " ".join(
    f"Room {i} on floor {i % 4 + 1} seats {4 + i} people and is booked through the calendar." for i in range(1, 54)
)
BICYCLES = (
    "Bicycles are parked in the basement, which opens at six in the morning and closes at ten at night. "
    "The ramp is on the north side of the building, beside the loading bay, and the door opens with your badge. "
    "Cargo bikes have their own row by the stairs, and a pump and a small set of tools hang on the wall. "
    "The basement holds 48 bicycle parking spaces, and a charging point for electric bikes is next to the lift. "
    "Bicycles left for more than thirty days are labelled, and removed a week after the label goes up."
)


def report_pdf(title: str = "Microsoft Word - facilities.docx", code_lines: int = 0) -> bytes:
    """A PDF as a word processor exports one: a running header and "Page N of M" on every
    page, the title large on page one, numbered headings, and a paragraph that goes on over
    a page break (the bicycle parking, whose spaces are counted on page two). Its metadata
    title is the one the exporting program made up. ``code_lines`` lines of code in a smaller
    fixed font follow, as a technical guide's do."""
    from fpdf import FPDF

    class Report(FPDF):
        def header(self) -> None:
            self.set_font("Helvetica", "I", 8)
            self.cell(0, 6, "Lumen Facilities Guide - internal", align="C")
            self.ln(10)

        def footer(self) -> None:
            self.set_y(-15)
            self.set_font("Helvetica", "I", 8)
            self.cell(0, 10, f"Page {self.page_no()} of {{nb}}", align="C")

    pdf = Report()
    pdf.set_title(title)
    pdf.alias_nb_pages()
    pdf.add_page()
    for size, style, text in (
        (20, "B", "Lumen Facilities Guide"), (14, "B", "1. Meeting rooms"), (11, "", ROOMS),
        (14, "B", "2. Bicycle parking"), (11, "", BICYCLES),
    ):  # fmt: skip
        pdf.set_font("Helvetica", style, size)
        pdf.multi_cell(0, 6 if size == 11 else 9, text, new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Courier", "", 9)
    for i in range(code_lines):
        pdf.cell(0, 4, f"    bikes.append(Bicycle(slot={i}, owner=badge_holder(row={i % 7}), charging=False))")
        pdf.ln(4)
    return bytes(pdf.output())


def image_only_pdf() -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.rect(20, 20, 100, 60, style="F")  # a scan, as far as text extraction can tell
    return bytes(pdf.output())


CONTACTS_SHEETS: dict[str, list[list[str]]] = {
    "Contacts": [["Team", "Email"], ["Payments", "payments@lumen.example"]],
    "Escalation": [
        ["Severity", "Who to call", "Within"],
        ["SEV3", "Team lead", "next working day"],
        ["SEV1", "Head of platform Birgitte Holm", "15 minutes"],
    ],
}


def xlsx_bytes(sheets: dict[str, list[list[str]]] | None = None) -> bytes:
    """A workbook with these sheets (name -> rows), in order; by default a contacts sheet and an escalation table."""
    import openpyxl

    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for name, rows in (sheets or CONTACTS_SHEETS).items():
        ws = wb.create_sheet(name)
        for row in rows:
            ws.append(row)
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def docx_bytes() -> bytes:
    import docx

    d = docx.Document()
    d.add_heading("Office Handbook", level=0)
    d.add_heading("Keys and access", level=1)
    d.add_paragraph("Lost key cards are replaced by reception for a fee of 150 DKK.")
    d.add_heading("Meeting rooms", level=1)
    d.add_paragraph("Rooms are booked in the calendar.")
    t = d.add_table(rows=3, cols=2)
    for row, cells in zip(t.rows, [("Room", "Seats"), ("Aurora", "12"), ("Fjord", "4")], strict=True):
        row.cells[0].text, row.cells[1].text = cells
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def pptx_bytes() -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    s1 = deck.slides.add_slide(deck.slide_layouts[1])
    s1.shapes.title.text = "Roadmap 2027"
    s1.placeholders[1].text = "Ship the mobile app in Q2."
    s2 = deck.slides.add_slide(deck.slide_layouts[5])
    s2.shapes.title.text = "Hiring"
    box = s2.shapes.add_textbox(Inches(1), Inches(2), Inches(6), Inches(1))
    box.text_frame.text = "Two backend engineers join in March."
    s2.notes_slide.notes_text_frame.text = "The hiring budget is frozen until the board meets in April."
    buf = io.BytesIO()
    deck.save(buf)
    return buf.getvalue()


HTML = """<!doctype html><html><head><title>Wiki: Deploys</title><script>var x = "never indexed";</script></head>
<body><nav>Home | About</nav><main><h1>Deploys</h1><p>Deploys run from the main branch.</p>
<h2>Freeze</h2><p>No deploys on Fridays after 14:00 &amp; never during a SEV1.</p><ul><li>Ask in #deploys first.</li></ul>
</main><footer>© Lumen Works</footer></body></html>"""


def zip_bomb(path: Path) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", b"\0" * 60_000_000)


def scanned_pdf(pages: list[str]) -> bytes:
    """A PDF whose pages are pictures of text: what a scanner produces."""
    from fpdf import FPDF
    from PIL import Image, ImageDraw, ImageFont

    pdf = FPDF()
    font = ImageFont.load_default(size=44)
    for text in pages:
        img = Image.new("RGB", (1654, 2339), "white")  # A4 at 200 dpi
        draw = ImageDraw.Draw(img)
        y = 150
        for line in text.split("\n"):
            draw.text((120, y), line, fill="black", font=font)
            y += 70
        pdf.add_page()
        pdf.image(img, x=0, y=0, w=210, h=297)
    return bytes(pdf.output())
