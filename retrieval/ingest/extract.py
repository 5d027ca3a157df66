"""Text extraction: which extractor reads a file, by its suffix.

An extractor turns a file's bytes into a :class:`Document` with canonical text. Every
extractor has a name and a version; both are stamped on the document in the
manifest so that an extractor change marks its documents stale. One module per
format lives in :mod:`retrieval.ingest.formats`.
"""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import Protocol

from retrieval.ingest.formats.docx import DocxExtractor
from retrieval.ingest.formats.html import HtmlExtractor
from retrieval.ingest.formats.markdown import MarkdownExtractor
from retrieval.ingest.formats.pdf import PdfExtractor
from retrieval.ingest.formats.sheet import CsvExtractor, XlsxExtractor
from retrieval.ingest.formats.slides import PptxExtractor
from retrieval.ingest.formats.transcript import TranscriptExtractor
from retrieval.types import Document


class Extractor(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def suffixes(self) -> tuple[str, ...]: ...

    @property
    def isolated(self) -> bool:
        """Parsed in a worker process with time and memory limits."""
        ...

    def extract(self, rel_path: str, data: bytes) -> Document: ...


def _registry(ocr: bool = False) -> tuple[Extractor, ...]:
    return (
        MarkdownExtractor(),
        PdfExtractor(ocr=ocr),
        DocxExtractor(),
        XlsxExtractor(),
        CsvExtractor(),
        PptxExtractor(),
        HtmlExtractor(),
        TranscriptExtractor(),
    )


EXTRACTORS: tuple[Extractor, ...] = _registry()
OCR_EXTRACTORS: tuple[Extractor, ...] = _registry(ocr=True)


def extractor_for(path: str | Path, ocr: bool = False) -> Extractor | None:
    """The extractor that handles this file's suffix, or None when the type is unsupported."""
    suffix = PurePath(str(path)).suffix.lower()
    for ex in OCR_EXTRACTORS if ocr else EXTRACTORS:
        if suffix in ex.suffixes:
            return ex
    return None
