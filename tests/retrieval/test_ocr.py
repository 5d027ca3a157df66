"""OCR of image-only PDFs with Debian's tesseract (FOOTNOTE_OCR=1), page locators kept."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from retrieval.answer.citations import Linker, make_citations
from retrieval.errors import ExtractionError
from retrieval.index.manifest import FAILED, INDEXED
from retrieval.ingest.extract import extractor_for
from retrieval.ingest.formats.pdf import PdfExtractor
from retrieval.models.embed import SentenceTransformerEmbedder
from tests.conftest import make_engine
from tests.retrieval import fixtures as fx

SCAN = [
    "Scanned memo, page one.\nThe canteen opens at eight.",
    "Page two of the memo.\nVisitors must sign in at the\nfront desk and wear a badge.",
]


def test_tesseract_is_installed() -> None:
    assert shutil.which("tesseract"), "Debian's tesseract-ocr must be installed (.ci/run does it)"


def test_ocr_reads_a_scanned_page_and_cites_its_page(embedder: SentenceTransformerEmbedder, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "memo.pdf").write_bytes(fx.scanned_pdf(SCAN))
    plain = make_engine(embedder, tmp_path / "plain", docs)
    plain.sync()
    rec = plain.manifest.get("memo.pdf")
    assert rec is not None and rec.state == FAILED and "OCR not enabled" in (rec.reason or "")

    eng = make_engine(embedder, tmp_path / "ocr", docs, ocr=True)
    eng.sync()
    rec = eng.manifest.get("memo.pdf")
    assert (
        rec is not None
        and rec.state == INDEXED
        and rec.stamps is not None
        and rec.stamps.extractor_version == PdfExtractor(ocr=True).version == f"{PdfExtractor().version}+ocr"
    )
    hit = eng.searcher().search("Where do visitors sign in?", k=1).hits[0]
    assert "front desk" in hit.chunk.content.lower()
    (cite,) = make_citations([hit], Linker(docs_dir=docs))
    assert cite.locator == "#page=2" and cite.label == "p. 2"


def test_ocr_without_tesseract_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    ex = extractor_for("scan.pdf", ocr=True)
    assert ex is not None
    with pytest.raises(ExtractionError, match="tesseract is not installed"):
        ex.extract("scan.pdf", fx.scanned_pdf(["Hello"]))
