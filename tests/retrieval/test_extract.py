"""Extraction: encodings, canonical text, title and sections."""

from __future__ import annotations

import io
from typing import Any

import pytest

from retrieval.errors import ExtractionError
from retrieval.ingest.extract import extractor_for
from retrieval.ingest.formats.markdown import MarkdownExtractor
from retrieval.types import Document

EX = MarkdownExtractor()


def test_latin1_text_decodes_correctly() -> None:
    doc = EX.extract(
        "notes.txt",
        "Café menu: crème brûlée costs 7 €… no, 7 kr.\nSmørrebrød is served daily.".encode("latin-1", "replace"),
    )
    assert "Café" in doc.text and "Smørrebrød" in doc.text


def test_utf16_with_bom_decodes() -> None:
    doc = EX.extract("a.txt", "# Title\n\nHello wörld".encode("utf-16"))
    assert doc.title == "Title" and "wörld" in doc.text


def test_crlf_is_normalised_and_offsets_refer_to_canonical_text() -> None:
    doc = EX.extract("a.md", b"# T\r\n\r\n## S\r\nbody line\r\n")
    assert "\r" not in doc.text
    sec = doc.sections[-1]
    assert sec.title == "S" and doc.text[sec.start : sec.end].strip() == "body line"


@pytest.mark.parametrize(
    ("data", "reason"),
    [(b"", "empty file"), (b"\x00\x01\x02\xff" * 100, "binary"), (b"   \n\n  ", "blank")],
)
def test_bad_inputs_raise_with_a_reason(data: bytes, reason: str) -> None:
    with pytest.raises(ExtractionError, match=reason):
        EX.extract("x.md", data)


def test_title_falls_back_to_file_name_and_preamble_is_a_section() -> None:
    doc = EX.extract("dir/handbook-2024.md", b"Intro text.\n\n## First\nOne.\n")
    assert doc.title == "handbook-2024"
    assert [s.title for s in doc.sections] == ["", "First"]


def test_heading_inside_code_fence_is_not_a_section() -> None:
    md = b"# T\n\n## Real\ntext\n\n```\n## not a heading\n```\n\n## Second\nmore\n"
    doc = EX.extract("a.md", md)
    assert [s.title for s in doc.sections] == ["Real", "Second"]


_PAGE = b"""---
title: "Travel: Frequently Asked Questions"
redirect_from:
  - /travel-guide-faq/
sidebar:
  title: Not the page title
---

Book through the travel desk.

## Booking
Flights are booked in Concur.
"""


def test_front_matter_sets_the_title_and_is_never_a_passage() -> None:
    doc = EX.extract("pages/travel-faq.md", _PAGE)
    assert doc.title == "Travel: Frequently Asked Questions"
    assert [s.title for s in doc.sections] == ["", "Booking"]
    quoted = "".join(doc.text[s.start : s.end] for s in doc.sections)
    assert "redirect_from" not in quoted and "sidebar" not in quoted
    assert doc.text[doc.sections[0].start : doc.sections[0].end].strip() == "Book through the travel desk."


@pytest.mark.parametrize(
    ("data", "title"),
    [
        (b"+++\ntitle = 'Leave'\ndate = 2024-01-01\n+++\nTake leave in Tock.\n", "Leave"),  # Hugo's TOML
        (
            b"---\ntitle: Leave\n---\n# Leave types\n\nTake leave in Tock.\n",
            "Leave types",
        ),  # the page's own heading wins
        (b"---\ntitle: |\n  Leave\n---\nTake leave in Tock.\n", "leave"),  # a block value: the file name
        (b"--- not front matter\ntitle: x\n---\nText.\n", "leave"),
        (b"---\ntitle: Leave # draft\n---\nTake leave in Tock.\n", "Leave"),  # a comment is not the title
    ],
)
def test_front_matter_forms(data: bytes, title: str) -> None:
    doc = EX.extract("leave.md", data)
    assert doc.title == title
    assert all("title" not in doc.text[s.start : s.end] or "not front matter" in doc.text for s in doc.sections)


def test_headings_are_labels_without_their_markup() -> None:
    doc = EX.extract(
        "sec.md", b"# The [TTS](https://tts.gov) handbook\n\n## Reporting [Phishing](https://x.gov/p?t=1)\nReport it.\n"
    )
    assert doc.title == "The TTS handbook" and doc.sections[-1].title == "Reporting Phishing"


def test_a_page_that_opens_with_a_rule_keeps_its_words() -> None:
    doc = EX.extract("rule.md", b"---\nIntro paragraph that matters a lot.\n\n---\n\nMore text here.\n")
    assert "Intro paragraph" in doc.text[doc.sections[0].start : doc.sections[0].end]


def test_a_page_of_front_matter_only_is_a_clear_failure() -> None:
    with pytest.raises(ExtractionError, match="besides its title or front matter"):
        EX.extract("x.md", b"---\ntitle: Draft\n---\n")


def test_unsupported_suffix_has_no_extractor() -> None:
    assert extractor_for("movie.mp4") is None
    assert extractor_for("README.MARKDOWN") is not None


def _extract(name: str, data: bytes) -> Document:
    """``data`` read by the extractor the sync picks for ``name``."""
    ex = extractor_for(name)
    assert ex is not None, name
    return ex.extract(name, data)


def _saved(office: Any) -> bytes:
    """A python-docx, openpyxl or python-pptx document as the bytes of its file."""
    out = io.BytesIO()
    office.save(out)
    return out.getvalue()


def _workbook(*rows: list[Any]) -> bytes:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    assert ws is not None
    for row in rows:
        ws.append(row)
    return _saved(wb)


WIKI_EXPORT = b"""<html><head><title>Badges</title></head><body>
<div class="page">Badges are collected at the front desk.<br>Bring photo ID.
<div><span>Lost badges cost <b>200 kr</b>.</span></div></div>
Words loose in the body count too.<p hidden>Draft: never shown.</p><!-- a comment is no text -->
<h2>Visitors</h2><div>Visitors sign in at reception<ul><li>and wear a red lanyard</li></ul>until they leave.</div>
</body></html>"""


def test_html_text_outside_paragraph_tags_is_read_block_by_block() -> None:
    """A wiki export or a generated page puts its text in <div>s and <span>s, not <p>s: all of
    it is the document's, and a nested list splits the text around it into its own paragraphs."""
    doc = _extract("badges.html", WIKI_EXPORT)
    paragraphs = doc.text.split("\n\n")
    assert paragraphs == [
        "Badges are collected at the front desk.\nBring photo ID.",
        "Lost badges cost 200 kr.",
        "Words loose in the body count too.",
        "Visitors sign in at reception",
        "and wear a red lanyard",
        "until they leave.",
    ]
    assert [s.title for s in doc.sections] == ["", "Visitors"] and doc.title == "Badges"
    assert "Draft" not in doc.text and "comment" not in doc.text


def test_a_deeply_nested_page_is_read_without_exhausting_the_stack() -> None:
    page = b"<html><body>" + b"<div>" * 5000 + b"Deep words." + b"</div>" * 5000 + b"</body></html>"
    assert _extract("deep.html", page).text == "Deep words."


def _word_with_hidden_places() -> bytes:
    """A Word file as forms, reviewers and designers leave them: a content control, a tracked
    insertion beside a tracked deletion, a text box, and a cell merged across two columns."""
    import docx
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    d = docx.Document()
    d.add_paragraph("Plain paragraph about badges.")
    t = d.add_table(rows=2, cols=3)
    for j, v in enumerate(["Item", "Limit", "Note"]):
        t.cell(0, j).text = v
    t.cell(1, 0).text = "Hotel"
    t.cell(1, 1).merge(t.cell(1, 2)).text = "1200 per night"
    body = d.element.body
    w, shapes = (
        nsdecls("w", "wp", "a"),
        (
            'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape" '
            'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'
        ),
    )
    for xml in (
        f"<w:sdt {w}><w:sdtContent><w:p><w:r><w:t>Parking is free for visitors.</w:t></w:r></w:p></w:sdtContent></w:sdt>",
        f'<w:p {w}><w:r><w:t xml:space="preserve">Lunch is served at </w:t></w:r>'
        '<w:del w:id="1" w:author="a"><w:r><w:delText>noon</w:delText></w:r></w:del>'
        '<w:ins w:id="2" w:author="a"><w:r><w:t>half past eleven</w:t></w:r></w:ins></w:p>',
        f'<w:p {w} {shapes}><w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><wp:anchor><a:graphic>'
        "<a:graphicData><wps:wsp><wps:txbx><w:txbxContent><w:p><w:r><w:t>The cafe opens at eight.</w:t></w:r></w:p>"
        "</w:txbxContent></wps:txbx></wps:wsp></a:graphicData></a:graphic></wp:anchor></w:drawing></mc:Choice>"
        "<mc:Fallback><w:pict><w:txbxContent><w:p><w:r><w:t>The cafe opens at eight.</w:t></w:r></w:p></w:txbxContent>"
        "</w:pict></mc:Fallback></mc:AlternateContent></w:r></w:p>",
    ):
        body.insert(len(body) - 1, parse_xml(xml))  # before the section properties, which end the body
    return _saved(d)


def test_word_text_in_content_controls_tracked_insertions_and_text_boxes_is_read_once() -> None:
    doc = _extract("office.docx", _word_with_hidden_places())
    assert doc.text.split("\n\n") == [
        "Plain paragraph about badges.",
        "Item: Hotel; Limit: 1200 per night",  # the merged cell once, not again as its Note
        "Parking is free for visitors.",
        "Lunch is served at half past eleven",  # the deleted "noon" is not the document's
        "The cafe opens at eight.",  # the text box once, not again from its fallback copy
    ]


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("prices.csv", "Vare;Beløb\nKaffe, sort;25\nTe;20\n".encode("latin-1")),  # Excel's Danish export
        ("prices.tsv", b"Vare\tBel\xc3\xb8b\nKaffe, sort\t25\nTe\t20\n"),  # commas in a cell, tabs between
    ],
)
def test_a_csv_or_tsv_export_becomes_header_value_rows(name: str, data: bytes) -> None:
    doc = _extract(name, data)
    assert doc.text.split("\n\n") == ["Vare: Kaffe, sort; Beløb: 25", "Vare: Te; Beløb: 20"]
    assert doc.locator == "sheet" and doc.title == "prices"


def test_a_pdf_restricted_with_aes_but_no_password_to_open_is_read() -> None:
    """Acrobat's "restrict editing" encrypts with AES and an owner password only: readers open
    it without asking, and so does the sync (pypdf needs `cryptography` for AES)."""
    from tests.retrieval import fixtures as fx

    doc = _extract("policy.pdf", fx.pdf_bytes(["Badges are collected at the front desk."], restrict=True))
    assert doc.text == "Badges are collected at the front desk." and doc.title == "Travel Policy"


def test_pdf_ligatures_are_read_as_their_letters() -> None:
    """A typeset PDF draws "fi" and "ffi" as one glyph, which pypdf gives as one code point
    ("ﬁle", "oﬃce"): neither a question's "file" nor a needle's "office" would match it."""
    from pathlib import Path

    import matplotlib
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_font("dejavu", fname=str(Path(matplotlib.get_data_path()) / "fonts/ttf/DejaVuSans.ttf"))
    pdf.set_font("dejavu", size=12)
    pdf.add_page()
    pdf.multi_cell(0, 8, "The \ufb01le is in the o\ufb03ce, \ufb02oor two.")
    assert _extract("typeset.pdf", bytes(pdf.output())).text == "The file is in the office, floor two."


def test_a_pdf_s_running_header_and_page_numbers_are_no_passage() -> None:
    """A word processor's export repeats its header and "Page N of M" on every page: read as
    text, each would be a passage of its own, and the paragraph that goes on over the page
    break would be cut by them."""
    from tests.retrieval import fixtures as fx

    doc = _extract("facilities.pdf", fx.report_pdf())
    assert "internal" not in doc.text and "Page 1 of 2" not in doc.text and "Page 2" not in doc.text
    assert " ".join(fx.BICYCLES.split()) in " ".join(doc.text.split())  # whole, over the page break
    assert "stairs" in doc.text[doc.text.index("Cargo bikes") :].split("\n\n")[0]  # one paragraph


def test_a_pdf_s_headings_are_its_sections_and_its_largest_its_title() -> None:
    """Headings are found by their size; the one that opens the document, larger than every
    other, is its title when the metadata's title is the exporting program's ("Microsoft
    Word - facilities.docx"). Each section marks the pages it goes over."""
    from tests.retrieval import fixtures as fx

    doc = _extract("facilities.pdf", fx.report_pdf())
    assert doc.title == "Lumen Facilities Guide"
    assert [s.title for s in doc.sections] == ["1. Meeting rooms", "2. Bicycle parking"]
    bikes = doc.sections[1]
    assert doc.text[bikes.start : bikes.end].startswith("Bicycles are parked")
    assert [page for _, page in bikes.meta["marks"]] == [1, 2] and bikes.meta["page"] == 1
    assert _extract("facilities.pdf", fx.report_pdf(title="Facilities")).title == "Facilities"


def test_a_pdf_s_prose_is_no_heading_where_its_code_has_more_letters() -> None:
    """In a technical guide the code, in a smaller fixed font, can hold more letters than the
    prose: the prose's size is still the body's, and its lines are no headings."""
    from tests.retrieval import fixtures as fx

    doc = _extract("facilities.pdf", fx.report_pdf(code_lines=120))
    assert [s.title for s in doc.sections] == ["1. Meeting rooms", "2. Bicycle parking"]
    assert "bikes.append(Bicycle(slot=119" in doc.text[doc.sections[1].start : doc.sections[1].end]


@pytest.mark.parametrize(
    "made_up",
    ["PowerPoint Presentation", "Presentation1", "Document1", "Microsoft Word - roadmap.docx", "roadmap.pptx"],
)
def test_a_title_a_program_made_up_gives_way_to_the_document_s_own(made_up: str) -> None:
    """PowerPoint's template titles every deck "PowerPoint Presentation", and an exported PDF
    is titled after its program and file: every passage's header would say so. The first
    slide's title, the Word document's Title paragraph, or the file name is used instead."""
    import docx
    from pptx import Presentation

    from tests.retrieval import fixtures as fx

    deck = Presentation(io.BytesIO(fx.pptx_bytes()))
    deck.core_properties.title = made_up
    assert _extract("roadmap.pptx", _saved(deck)).title == "Roadmap 2027"
    word = docx.Document(io.BytesIO(fx.docx_bytes()))
    word.core_properties.title = made_up
    assert _extract("handbook.docx", _saved(word)).title == "Office Handbook"
    deck.core_properties.title = "Roadmap for 2027, as agreed"
    assert _extract("roadmap.pptx", _saved(deck)).title == "Roadmap for 2027, as agreed"


def test_a_word_title_paragraph_is_never_a_passage_even_beside_a_title_property() -> None:
    import docx

    from tests.retrieval import fixtures as fx

    word = docx.Document(io.BytesIO(fx.docx_bytes()))
    word.core_properties.title = "Lumen office handbook 2027"
    doc = _extract("handbook.docx", _saved(word))
    assert doc.title == "Lumen office handbook 2027" and "Office Handbook" not in doc.text


def test_a_pdf_page_whose_sizes_cannot_be_read_keeps_its_words() -> None:
    from retrieval.ingest.formats.pdf import Line, page_lines
    from testkit.fakes import MalformedPdfPage

    assert page_lines(MalformedPdfPage()) == [Line("Badges are collected at the front desk.", 0.0)]


def test_a_slide_s_title_heads_its_section_and_is_not_read_again_as_its_text() -> None:
    from tests.retrieval import fixtures as fx

    doc = _extract("roadmap.pptx", fx.pptx_bytes())
    texts = {s.title: doc.text[s.start : s.end] for s in doc.sections}
    assert texts["Slide 1: Roadmap 2027"] == "Ship the mobile app in Q2."
    assert texts["Slide 2: Hiring"].startswith("Two backend engineers join in March.")


def test_a_pdf_in_one_font_size_is_read_page_by_page() -> None:
    from tests.retrieval import fixtures as fx

    doc = _extract("p.pdf", fx.pdf_bytes(["Trains are preferred.", "Hotels are approved."]))
    assert [(s.title, s.meta) for s in doc.sections] == [("p. 1", {"page": 1}), ("p. 2", {"page": 2})]
    # Pages that are one and the same line are no running header: that line is their text.
    same = _extract("p.pdf", fx.pdf_bytes(["Badges are collected at the front desk."] * 2))
    assert same.text.count("Badges are collected") == 2


def test_a_spreadsheet_date_reads_as_the_sheet_shows_it() -> None:
    import datetime

    data = _workbook(
        ["Item", "Due", "Starts", "Slot"],
        ["Audit", datetime.date(2026, 1, 5), datetime.datetime(2026, 2, 1, 14, 30), datetime.time(9, 15, 30)],
    )
    text = _extract("plan.xlsx", data).text
    assert text == "Item: Audit; Due: 2026-01-05; Starts: 2026-02-01 14:30; Slot: 09:15:30"


def test_a_title_row_above_a_table_does_not_label_its_columns() -> None:
    """Real workbooks open with a title ("Travel budget 2026") and a blank row before the
    table's header: the header is the first row of two or more cells, the title its own line."""
    data = _workbook(["Travel budget 2026"], [], ["Item", "Cost", "Owner"], ["Taxi", 500, "Ann"], ["Hotel", 1200, "Bo"])
    doc = _extract("budget.xlsx", data)
    assert doc.text.split("\n\n") == [
        "Travel budget 2026",
        "Item: Taxi; Cost: 500; Owner: Ann",
        "Item: Hotel; Cost: 1200; Owner: Bo",
    ]
    assert [row for _, row in doc.sections[0].meta["marks"]] == [1, 4, 5]  # A1 ranges keep the sheet's rows


def test_a_word_tables_caption_row_is_its_own_line_above_header_value_rows() -> None:
    import docx

    d = docx.Document()
    t = d.add_table(rows=4, cols=3)
    t.cell(0, 0).merge(t.cell(0, 2)).text = "Travel limits 2026"  # one cell across the table
    for i, row in enumerate((["Item", "Limit", "Owner"], ["Taxi", "500", "Ann"], ["Hotel", "1200", "Bo"]), start=1):
        for j, v in enumerate(row):
            t.cell(i, j).text = v
    names = d.add_table(rows=4, cols=1)  # one column: its first row stays the header
    for i, v in enumerate(["On call", "Ann", "Bo", "Cy"]):
        names.cell(i, 0).text = v
    assert _extract("limits.docx", _saved(d)).text.split("\n\n") == [
        "Travel limits 2026",
        "Item: Taxi; Limit: 500; Owner: Ann",
        "Item: Hotel; Limit: 1200; Owner: Bo",
        "On call: Ann",
        "On call: Bo",
        "On call: Cy",
    ]


def test_a_slides_line_break_is_a_newline_not_a_vertical_tab() -> None:
    from pptx import Presentation
    from pptx.oxml.ns import qn

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    para = slide.placeholders[1].text_frame.paragraphs[0]
    para.add_run().text = "Lost badge"
    para._p.append(para._p.makeelement(qn("a:br"), {}))  # Shift+Enter in PowerPoint
    para.add_run().text = "costs 200 kr"
    assert _extract("badges.pptx", _saved(deck)).text == "Lost badge\ncosts 200 kr"


def test_caption_entities_are_read_and_srt_placement_codes_dropped() -> None:
    vtt = b"WEBVTT\n\n00:00:04.500 --> 00:00:06.000\n<v.loud Mette>R&amp;D signs off &lt;before&gt; launch.\n"
    srt = b"1\n00:00:01,000 --> 00:00:04,000\n{\\an8}Backups are {\\i1}restored{\\i0} every quarter.\n"
    for name, data, said in (
        ("sync.vtt", vtt, "Mette: R&D signs off <before> launch."),
        ("sync.srt", srt, "Backups are restored every quarter."),
    ):
        assert _extract(name, data).text == said


def test_word_footnotes_and_endnotes_are_sections_after_the_body() -> None:
    import docx
    from docx.opc.constants import CONTENT_TYPE, RELATIONSHIP_TYPE
    from docx.opc.packuri import PackURI
    from docx.opc.part import Part

    d = docx.Document()
    d.add_paragraph("Staff get a parking permit.")
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    for name, kind, text in (
        ("footnotes", "footnote", "Applies to permanent staff only."),
        ("endnotes", "endnote", "Revised by HR in March."),
    ):
        xml = (
            f'<w:{name} {w}><w:{kind} w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:{kind}>'
            f'<w:{kind} w:id="1"><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:{kind}></w:{name}>'
        )
        content_type = CONTENT_TYPE.WML_FOOTNOTES if kind == "footnote" else CONTENT_TYPE.WML_ENDNOTES
        part = Part(PackURI(f"/word/{name}.xml"), content_type, xml.encode(), d.part.package)
        d.part.relate_to(part, RELATIONSHIP_TYPE.FOOTNOTES if kind == "footnote" else RELATIONSHIP_TYPE.ENDNOTES)
    doc = _extract("parking.docx", _saved(d))
    assert doc.text.split("\n\n") == [
        "Staff get a parking permit.",
        "Applies to permanent staff only.",
        "Revised by HR in March.",
    ]
    assert [s.title for s in doc.sections] == ["", "Footnotes", "Endnotes"]
