"""Slides (PPTX): one section per slide with its text, tables and speaker notes; ``#slide=N``."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from retrieval.errors import ExtractionError
from retrieval.ingest.formats.archive import check_zip
from retrieval.ingest.formats.builder import TextBuilder, meant_title
from retrieval.types import Document


def _shape_texts(shape: Any) -> list[str]:
    out: list[str] = []
    if getattr(shape, "has_text_frame", False) and shape.text_frame.text.strip():
        out.append(shape.text_frame.text)
    if getattr(shape, "has_table", False):
        for row in shape.table.rows:
            out.append(" | ".join(c.text.strip() for c in row.cells if c.text.strip()))
    for child in getattr(shape, "shapes", []):  # grouped shapes
        out.extend(_shape_texts(child))
    return out


@dataclass(frozen=True)
class PptxExtractor:
    name: str = "pptx"
    version: str = "3"  # 2: a line break inside a paragraph is a newline, not a vertical tab; 3: made-up titles,
    # and a slide's title no longer read again as its first line
    suffixes: tuple[str, ...] = (".pptx",)
    isolated: bool = True

    def extract(self, rel_path: str, data: bytes) -> Document:
        from pptx import Presentation

        check_zip(data, "presentation")
        try:
            deck = Presentation(io.BytesIO(data))
        except Exception as exc:
            raise ExtractionError(f"corrupt presentation: {exc}") from exc
        b = TextBuilder()
        first_title = ""
        for n, slide in enumerate(deck.slides, start=1):
            title_shape = slide.shapes.title
            title = (
                title_shape.text_frame.text.strip() if title_shape is not None and title_shape.has_text_frame else ""
            )
            first_title = first_title or title
            # python-pptx wraps the same shape in a new object each time it is asked: the title is
            # told by its element, or every slide's title was read again as the first line of its text.
            title_element = title_shape.element if title_shape is not None else None
            texts = [t for s in slide.shapes if s.element is not title_element for t in _shape_texts(s)]
            if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
                notes = slide.notes_slide.notes_text_frame.text.strip()
                if notes:
                    texts.append(f"Notes: {notes}")
            b.section(f"Slide {n}: {title}" if title else f"Slide {n}", texts or [title], {"slide": n})
        if b.empty:
            raise ExtractionError("no text: the slides hold no text (images only?)")
        title = meant_title(deck.core_properties.title) or first_title or PurePath(rel_path).stem
        return b.document(rel_path, title, self.name, self.version, locator="slide")
