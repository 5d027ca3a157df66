"""PDF: one section per page, so a chunk never spans two pages and cites ``#page=N``."""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass
from pathlib import PurePath

from retrieval.errors import ExtractionError
from retrieval.ingest.formats.builder import PAGE_BREAK, TextBuilder
from retrieval.types import Document

# pypdf gives a font's ligature glyph as its own code point ("ﬁle", "oﬃce"), which no one types:
# a question's "file" would not find it, nor a quote read aloud. Letters, as a reader copies them.
LIGATURES = str.maketrans(
    {"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl", "\ufb05": "st", "\ufb06": "st"}
)


@dataclass(frozen=True)
class PdfExtractor:
    name: str = "pdf"
    version: str = "2"  # 2: typographic ligatures read as their letters
    suffixes: tuple[str, ...] = (".pdf",)
    isolated: bool = True
    ocr: bool = False  # read image-only pages with tesseract

    def __post_init__(self) -> None:
        if self.ocr:  # part of the stamp: turning OCR on rebuilds the PDFs that had no text
            object.__setattr__(self, "version", f"{self.version}+ocr")

    def extract(self, rel_path: str, data: bytes) -> Document:
        logging.getLogger("pypdf").setLevel(logging.ERROR)  # malformed-but-readable files warn per object
        from pypdf import PdfReader
        from pypdf.errors import FileNotDecryptedError, PdfReadError

        if not data:
            raise ExtractionError("empty file (0 bytes): nothing to index")
        try:
            reader = PdfReader(io.BytesIO(data))
            if reader.is_encrypted and not reader.decrypt(""):
                raise ExtractionError("encrypted PDF: it needs a password to open")
            pages = [(page.extract_text() or "").translate(LIGATURES) for page in reader.pages]
        except ExtractionError:
            raise
        except FileNotDecryptedError as exc:
            raise ExtractionError("encrypted PDF: it needs a password to open") from exc
        except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
            raise ExtractionError(f"corrupt PDF: {exc}") from exc
        blank = [n for n, text in enumerate(pages, start=1) if not text.strip()]
        read: dict[int, str] = {}
        if blank and self.ocr:
            from retrieval.ingest.formats.ocr import ocr_pages

            read = ocr_pages(data, blank)
        b = TextBuilder(PAGE_BREAK)
        for n, text in enumerate(pages, start=1):
            meta = {"page": n, "ocr": True} if n in read else {"page": n}
            b.section(f"p. {n}", [read.get(n, text)], meta)
        if b.empty:
            why = "OCR found no text either" if self.ocr else "OCR not enabled"
            raise ExtractionError(f"image-only PDF ({len(pages)} pages): no text layer; {why}")
        meta_title = (reader.metadata.title if reader.metadata else None) or ""
        title = str(meta_title).strip() or PurePath(rel_path).stem
        return b.document(rel_path, title, self.name, self.version, locator="page")
