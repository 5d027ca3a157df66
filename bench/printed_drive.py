"""A Markdown drive printed as PDFs or Word files, the way a team's drive holds its exported
documents: ``python -m bench.printed_drive SRC DEST [--as pdf|docx|docx-unstyled|pptx]`` writes
``DEST/docs/NAME.pdf`` (``.docx``, ``.pptx``) for every Markdown file of ``SRC/docs`` and copies
``SRC``'s question files beside them, so ``footnote eval --docs DEST/docs`` scores that
format's reading of the same words with the same needles.

Each PDF looks like a word processor's export: the title large on its first page, headings
bold, paragraphs reflowed and justified, lists with bullets, code in a fixed font, the title
as a running header and "Page N of M" as a footer on every page, and the title in the
file's metadata. A Word file has the Title and Heading styles, List Bullet items and code
in Courier New; ``docx-unstyled`` sets its headings bold and large by hand instead, in
Normal paragraphs, as many documents written without a template do. A deck has a slide per
heading, its text in the body placeholder. Words are the
Markdown's as a reader sees them (links as their text), so a needle that is one sentence of
prose reads the same in every form.

The font is the DejaVu Sans that matplotlib (a development dependency) ships, so the
letters of a Danish drive print on any machine.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import click
import matplotlib
from fpdf import FPDF

from retrieval.ingest.formats.markdown import front_matter, markdown_structure
from retrieval.ingest.markup import plain

FONTS = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
_LIQUID = re.compile(r"\{%.*?%\}|\{\{.*?\}\}")
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")


class _Printed(FPDF):
    def __init__(self, title: str, font_dir: Path) -> None:
        super().__init__()
        self.doc_title = title
        self.add_font("Body", "", str(font_dir / "DejaVuSans.ttf"))
        self.add_font("Body", "B", str(font_dir / "DejaVuSans-Bold.ttf"))
        self.add_font("Body", "I", str(font_dir / "DejaVuSans-Oblique.ttf"))
        self.add_font("Mono", "", str(font_dir / "DejaVuSansMono.ttf"))
        self.set_title(title)
        self.alias_nb_pages()
        self.set_auto_page_break(True, margin=20)

    def header(self) -> None:
        self.set_font("Body", "I", 8)
        self.cell(0, 6, self.doc_title, align="C")
        self.ln(10)

    def footer(self) -> None:
        self.set_y(-15)
        self.set_font("Body", "I", 8)
        self.cell(0, 10, f"Page {self.page_no()} of {{nb}}", align="C")


def blocks(markdown: str) -> list[tuple[str, str]]:
    """The page's blocks in order: ("h1".."h6", text), ("p", text), ("li", text), ("code", text)."""
    out: list[tuple[str, str]] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            text = plain(_LIQUID.sub("", " ".join(para)), block_marker=False).strip()
            if text:
                out.append(("p", text))
            para.clear()

    fence: list[str] | None = None
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            flush()
            if fence is None:
                fence = []
            else:
                out.append(("code", "\n".join(fence)))
                fence = None
            continue
        if fence is not None:
            fence.append(line)
            continue
        h, item = _HEADING.match(line), _ITEM.match(line)
        if h or item or not line.strip() or line.lstrip().startswith("|"):
            flush()
        if h:
            out.append((f"h{len(h.group(1))}", plain(_LIQUID.sub("", h.group(2)), block_marker=False).strip()))
        elif item:
            out.append(("li", plain(_LIQUID.sub("", item.group(1)), block_marker=False).strip()))
        elif line.lstrip().startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                out.append(("p", plain(" · ".join(cells), block_marker=False)))
        elif line.strip():
            para.append(line.strip())
    flush()
    return [(kind, text) for kind, text in out if text]


HEADING_PT = {"h1": 16, "h2": 14, "h3": 12, "h4": 11, "h5": 11, "h6": 11}


def page_of(markdown: str, fallback: str) -> tuple[str, list[tuple[str, str]]]:
    """A Markdown page's title (as Footnote reads it) and its blocks after the front matter,
    without the first ``# `` heading that is the title: every form prints the title itself."""
    start, _ = front_matter(markdown)
    title, _sections = markdown_structure(markdown, fallback)
    found = blocks(markdown[start:])
    at = next((i for i, (kind, text) in enumerate(found) if kind == "h1" and text == title), None)
    return title, [b for i, b in enumerate(found) if i != at]


def print_pdf(markdown: str, fallback: str, font_dir: Path = FONTS) -> bytes:
    """The PDF of one Markdown page."""
    title, page = page_of(markdown, fallback)
    pdf = _Printed(title, font_dir)
    pdf.add_page()
    pdf.set_font("Body", "B", 20)
    pdf.multi_cell(0, 10, title, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    for kind, text in page:
        if kind in HEADING_PT:
            pdf.ln(2)
            pdf.set_font("Body", "B", HEADING_PT[kind])
            pdf.multi_cell(0, 7, text, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1)
        elif kind == "code":
            pdf.set_font("Mono", "", 9)
            pdf.multi_cell(0, 4.5, text, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2)
        elif kind == "li":
            pdf.set_font("Body", "", 11)
            pdf.set_x(pdf.l_margin + 5)
            pdf.multi_cell(0, 6, f"• {text}", align="J", new_x="LMARGIN", new_y="NEXT")
        else:
            pdf.set_font("Body", "", 11)
            pdf.multi_cell(0, 6, text, align="J", new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2)
    return bytes(pdf.output())


def word_file(markdown: str, fallback: str, styled: bool = True) -> bytes:
    """The Word document of one Markdown page (``styled``: its headings in Heading styles)."""
    import io

    import docx
    from docx.shared import Pt

    title, page = page_of(markdown, fallback)
    d = docx.Document()
    d.core_properties.title = title

    def by_hand(text: str, size: int) -> None:
        run = d.add_paragraph().add_run(text)
        run.bold, run.font.size = True, Pt(size)

    if styled:
        d.add_heading(title, level=0)
    else:
        by_hand(title, 20)
    for kind, text in page:
        if kind in HEADING_PT and styled:
            d.add_heading(text, level=int(kind[1]))
        elif kind in HEADING_PT:
            by_hand(text, HEADING_PT[kind])
        elif kind == "code":
            d.add_paragraph().add_run(text).font.name = "Courier New"
        elif kind == "li":
            d.add_paragraph(text, style="List Bullet")
        else:
            d.add_paragraph(text)
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def slide_deck(markdown: str, fallback: str) -> bytes:
    """The deck of one Markdown page: a title slide, then a slide per heading with its
    paragraphs, list items and code as the body's paragraphs (a long section makes a long
    slide, as an exported handout does)."""
    import io

    from pptx import Presentation

    title, page = page_of(markdown, fallback)
    deck = Presentation()
    deck.core_properties.title = title
    cover = deck.slides.add_slide(deck.slide_layouts[0])
    cover.shapes.title.text = title
    body: list[str] = []
    heading = ""

    def flush() -> None:
        if not body:
            return
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = heading or title
        frame = slide.placeholders[1].text_frame
        frame.text = body[0]
        for text in body[1:]:
            frame.add_paragraph().text = text
        body.clear()

    for kind, text in page:
        if kind in HEADING_PT:
            flush()
            heading = text
        else:
            body.append(text)
    flush()
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def printed(markdown: str, fallback: str, form: str, font_dir: Path = FONTS) -> bytes:
    if form == "pdf":
        return print_pdf(markdown, fallback, font_dir)
    if form == "pptx":
        return slide_deck(markdown, fallback)
    return word_file(markdown, fallback, styled=form == "docx")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("src", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@click.option("--as", "form", type=click.Choice(["pdf", "docx", "docx-unstyled", "pptx"]), default="pdf", show_default=True,
              help="PDF exports, Word files with heading styles or with headings set by hand, or slide decks.")  # fmt: skip
@click.option("--font", "font_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=FONTS,
              show_default=True, help="Folder holding DejaVuSans.ttf, -Bold, -Oblique and DejaVuSansMono.ttf.")  # fmt: skip
def main(src: Path, dest: Path, form: str, font_dir: Path) -> None:
    """Print SRC/docs's Markdown files as PDFs (or Word files) into DEST/docs, with SRC's
    question files beside them."""
    (dest / "docs").mkdir(parents=True, exist_ok=True)
    pages = sorted((src / "docs").rglob("*.md"))
    for n, page in enumerate(pages, start=1):
        rel = page.relative_to(src / "docs").with_suffix({"pdf": ".pdf", "pptx": ".pptx"}.get(form, ".docx"))
        click.echo(f"[{n}/{len(pages)}] {rel}", err=True)
        (dest / "docs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / "docs" / rel).write_bytes(printed(page.read_text(encoding="utf-8"), page.stem, form, font_dir))
    for jsonl in src.glob("*.jsonl"):
        shutil.copy(jsonl, dest / jsonl.name)
    click.echo(f"{len(pages)} {form} files in {dest / 'docs'}")


if __name__ == "__main__":
    main()
