"""Office formats end to end: generated files, real extractors, real embedder and Chroma.

Every format must slice back its quotes (``canonical[from:to] == content``) and cite
a place a person can open: a PDF page, a sheet range, a media time, a slide.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from retrieval.answer.citations import Linker, cite_evidence, locator_for, make_citations
from retrieval.answer.evidence import number_sentences
from retrieval.answer.pointers import in_context
from retrieval.index.manifest import FAILED, INDEXED
from retrieval.ingest.chunk import ChunkerConfig, chunk_document
from retrieval.ingest.extract import extractor_for
from retrieval.models.embed import SentenceTransformerEmbedder
from retrieval.search.engine import Engine
from tests.conftest import make_engine
from tests.retrieval import fixtures as fx

LONG_OPENING = (
    "Welcome to the quarterly planning call. Before we start, a reminder that this meeting is recorded "
    "and the captions are shared on the drive afterwards, so please keep customer names out of it. "
    "We will go through the roadmap, then hiring, then the budget, and we will leave ten minutes at "
    "the end for questions from the floor. If you joined late, the agenda is pinned in the channel "
    "and the slides are in the planning folder under this quarter's date."
)


def _vtt() -> str:
    return fx.VTT.replace("Welcome to the quarterly planning call.", LONG_OPENING)


def write_office_folder(docs: Path) -> None:
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "travel.pdf").write_bytes(
        fx.pdf_bytes(
            [
                "Travel policy. Trains are preferred for trips under 500 km. Book through the travel desk.",
                "Hotels. Hotel rooms up to 1,400 DKK per night are approved automatically.",
            ]
        )
    )
    (docs / "facilities.pdf").write_bytes(fx.report_pdf())
    (docs / "contacts.xlsx").write_bytes(fx.xlsx_bytes())
    (docs / "handbook.docx").write_bytes(fx.docx_bytes())
    (docs / "roadmap.pptx").write_bytes(fx.pptx_bytes())
    (docs / "deploys.html").write_text(fx.HTML, encoding="utf-8")
    (docs / "planning-call.vtt").write_text(_vtt(), encoding="utf-8")
    (docs / "planning-call.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42")  # the recording beside it
    (docs / "kantine.txt").write_bytes("# Kantine\n\nFredag: smørrebrød og æblekage.\n".encode("latin-1"))
    (docs / "wifi.txt").write_bytes("# Wi-Fi\n\nThe guest network password rotates every Monday.\n".encode("utf-16"))


@pytest.fixture(scope="module")
def office(embedder: SentenceTransformerEmbedder, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    root = tmp_path_factory.mktemp("office")
    write_office_folder(root / "docs")
    eng = make_engine(embedder, root / "data", root / "docs")
    eng.sync()
    return eng


def _top(eng: Engine, question: str):  # type: ignore[no-untyped-def]
    hits = eng.searcher().search(question, k=4).hits
    return hits[0], make_citations(hits[:1], Linker(docs_dir=eng.cfg.docs_dir))[0]


def test_every_format_is_indexed_with_its_extractor_stamp(office: Engine) -> None:
    recs = office.manifest.all()
    want = {
        "travel.pdf": "pdf",
        "facilities.pdf": "pdf",
        "contacts.xlsx": "xlsx",
        "handbook.docx": "docx",
        "roadmap.pptx": "pptx",
        "deploys.html": "html",
        "planning-call.vtt": "transcript",
        "kantine.txt": "markdown",
        "wifi.txt": "markdown",
    }
    for path, extractor in want.items():
        assert recs[path].state == INDEXED, (path, recs[path].reason)
        assert recs[path].stamps is not None and recs[path].stamps.extractor == extractor  # type: ignore[union-attr]
    assert "planning-call.mp4" not in recs


def test_every_quote_slices_back_out_of_its_canonical_text(
    embedder: SentenceTransformerEmbedder, office: Engine
) -> None:
    for src in sorted(office.cfg.docs_dir.iterdir()):
        ex = extractor_for(src.name)
        if ex is None:
            continue
        doc = ex.extract(src.name, src.read_bytes())
        chunks = chunk_document(doc, ChunkerConfig(), embedder.count_tokens)
        assert chunks, src.name
        for c in chunks:
            assert doc.text[c.start : c.end] == c.content, (src.name, c.start)


def test_an_answer_on_page_two_of_a_pdf_cites_page_two(office: Engine) -> None:
    hit, cite = _top(office, "What hotel room price per night is approved automatically?")
    assert hit.chunk.path == "travel.pdf" and "1,400 DKK" in cite.quote
    assert cite.locator == "#page=2" and cite.label == "p. 2" and cite.where == {"page": 2}
    assert cite.url.endswith("travel.pdf#page=2")


def test_a_spreadsheet_row_cites_its_sheet_and_range(office: Engine) -> None:
    hit, cite = _top(office, "Who do I call for a SEV1 escalation?")
    assert hit.chunk.path == "contacts.xlsx" and "Birgitte Holm" in cite.quote
    m = re.fullmatch(r"#sheet=Escalation&range=A(\d+):C(\d+)", cite.locator)
    assert m and int(m.group(1)) <= 3 <= int(m.group(2)), cite.locator
    assert cite.label == f"Escalation!A{m.group(1)}:C{m.group(2)}" and cite.where["sheet"] == "Escalation"
    assert "Severity: SEV1; Who to call: Head of platform Birgitte Holm; Within: 15 minutes" in cite.quote


def test_a_sentence_said_at_2_12_cites_its_time_and_opens_the_recording(office: Engine) -> None:
    hit, cite = _top(office, "How long are audit logs retained?")
    assert hit.chunk.path == "planning-call.vtt" and "eighteen months" in cite.quote
    assert cite.locator.startswith("#t=132.4,") and cite.label.startswith("2:12–")
    assert cite.where["start"] == pytest.approx(132.4)
    assert "planning-call.mp4#t=132.4," in cite.url  # the media file beside the captions
    assert "Jonas: The data retention period" in cite.quote


def _sentence(eng: Engine, question: str, words: str):  # type: ignore[no-untyped-def]
    """The top passage for ``question``, and the citation of its sentence containing ``words``."""
    hit = eng.searcher().search(question, k=4).hits[0]
    (sentence,) = [s for s in number_sentences([hit]) if words in s.text]
    return hit, cite_evidence(1, sentence, Linker(docs_dir=eng.cfg.docs_dir))


def test_a_cited_sentence_points_at_its_own_cue_row_and_page(office: Engine) -> None:
    hit, cite = _sentence(office, "How long are audit logs retained?", "eighteen months")
    assert hit.chunk.path == "planning-call.vtt"
    assert cite.locator == "#t=132.4,138.25" and cite.label == "2:12–2:18"  # the cue said at 2:12
    assert cite.where == {"start": 132.4, "end": 138.25} and cite.url.endswith("planning-call.mp4#t=132.4,138.25")
    assert locator_for(hit)[0] != cite.locator  # the passage holds more cues: its range is wider
    hit, cite = _sentence(office, "Who do I call for a SEV1 escalation?", "SEV1")
    assert hit.chunk.path == "contacts.xlsx" and hit.chunk.meta["mark_first"] < 3  # the passage has more rows
    assert cite.locator == "#sheet=Escalation&range=A3:C3" and cite.label == "Escalation!A3:C3"
    assert cite.quote.startswith("Severity: SEV1")
    hit, cite = _sentence(office, "What hotel room price per night is approved automatically?", "1,400 DKK")
    assert hit.chunk.path == "travel.pdf" and cite.locator == "#page=2" and cite.where == {"page": 2}


def test_a_pdf_section_over_two_pages_cites_the_page_each_sentence_is_on(office: Engine) -> None:
    """The bicycle section starts on page one and counts its spaces on page two: the passage
    is headed by its section, and the sentence cites page two."""
    hit, cite = _sentence(office, "How many bicycle parking spaces does the basement hold?", "48 bicycle")
    assert hit.chunk.path == "facilities.pdf" and hit.chunk.section == "2. Bicycle parking"
    assert hit.chunk.doc_title == "Lumen Facilities Guide"
    assert locator_for(hit)[0] == "#page=1" and cite.locator == "#page=2" and cite.label == "p. 2"
    assert "Page 1" not in hit.chunk.content and "internal" not in hit.chunk.content
    # Quoted with its neighbours, the quote starts on page one: the link still opens the page
    # the cited sentence is on.
    (sentence,) = [s for s in number_sentences([hit]) if "48 bicycle" in s.text]
    quoted = in_context(1, sentence, None, {}, None, Linker(docs_dir=office.cfg.docs_dir))
    page_two = next(offset for offset, page in hit.chunk.meta["marks"] if page == 2)
    assert quoted.start < page_two <= sentence.start and quoted.locator == "#page=2"


def test_slides_notes_and_html_and_word_tables_are_searchable(office: Engine) -> None:
    hit, cite = _top(office, "Is the hiring budget frozen?")
    assert hit.chunk.path == "roadmap.pptx" and cite.locator == "#slide=2" and "Notes:" in cite.quote
    hit, cite = _top(office, "Can we deploy on Friday afternoon?")
    assert hit.chunk.path == "deploys.html" and hit.chunk.section == "Freeze" and "&" in cite.quote
    assert cite.locator.startswith("#char=") and "never indexed" not in hit.chunk.text
    hit, cite = _top(office, "How many seats does the Aurora room have?")
    assert hit.chunk.path == "handbook.docx" and "Room: Aurora; Seats: 12" in cite.quote
    assert hit.chunk.section == "Meeting rooms" and hit.chunk.doc_title == "Office Handbook"
    hit, _ = _top(office, "When does the guest wifi password change?")
    assert hit.chunk.path == "wifi.txt"


def test_bad_office_files_fail_with_reasons_and_lose_nothing_else(
    embedder: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    write_office_folder(docs)
    good = fx.pdf_bytes(["One page of real text about parking spaces for bicycles."])
    (docs / "corrupt.pdf").write_bytes(good[: len(good) // 3])
    (docs / "locked.pdf").write_bytes(fx.pdf_bytes(["Salaries for 2027."], encrypt=True))
    (docs / "scan.pdf").write_bytes(fx.image_only_pdf())
    fx.zip_bomb(docs / "bomb.docx")
    (docs / "not-really.xlsx").write_bytes(os.urandom(2048))
    with (docs / "huge.pdf").open("wb") as f:
        f.truncate(200_000_000)  # sparse: 200 MB on paper, nothing on disk
    (docs / "model.bin.xyz").write_bytes(b"\x01\x02")
    eng = make_engine(embedder, tmp_path / "data", docs, max_file_bytes=50_000_000)
    report = eng.sync()
    recs = eng.manifest.all()

    def reason(p: str) -> str:
        assert recs[p].state == FAILED, (p, recs[p].state)
        return recs[p].reason or ""

    assert "corrupt PDF" in reason("corrupt.pdf")
    assert "encrypted PDF" in reason("locked.pdf")
    assert "no text layer; OCR not enabled" in reason("scan.pdf")
    assert "zip bomb" in reason("bomb.docx")
    assert "corrupt spreadsheet" in reason("not-really.xlsx")
    assert "too large" in reason("huge.pdf")
    assert report.skipped == {"model.bin.xyz": "unsupported file type", "planning-call.mp4": "unsupported file type"}
    for p in ("travel.pdf", "contacts.xlsx", "handbook.docx", "roadmap.pptx", "deploys.html", "planning-call.vtt"):
        assert recs[p].state == INDEXED and recs[p].chunks > 0
