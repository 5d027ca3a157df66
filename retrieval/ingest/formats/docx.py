"""Word (DOCX): headings become sections, tables become text rows, ``#char`` locators."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from retrieval.errors import ExtractionError
from retrieval.ingest.formats.archive import check_zip
from retrieval.ingest.formats.builder import TextBuilder
from retrieval.types import Document


@dataclass(frozen=True)
class DocxExtractor:
    name: str = "docx"
    version: str = "1"
    suffixes: tuple[str, ...] = (".docx",)
    isolated: bool = True

    def extract(self, rel_path: str, data: bytes) -> Document:
        import docx
        from docx.table import Table
        from docx.text.paragraph import Paragraph

        check_zip(data, "Word document")
        try:
            d = docx.Document(io.BytesIO(data))
        except Exception as exc:
            raise ExtractionError(f"corrupt Word document: {exc}") from exc
        title = (d.core_properties.title or "").strip()
        b = TextBuilder()
        section, paras = "", list[str]()
        for block in d.iter_inner_content():
            if isinstance(block, Paragraph):
                style = (block.style.name if block.style is not None else "") or ""
                text = block.text.strip()
                if style == "Title" and text and not title:
                    title = text
                elif style.startswith("Heading") and text:
                    b.section(section, paras)
                    section, paras = text, []
                elif text:
                    paras.append(text)
            elif isinstance(block, Table):
                paras.extend(_table_rows(block))
        b.section(section, paras)
        if b.empty:
            raise ExtractionError("no text: the Word document is blank")
        return b.document(rel_path, title or PurePath(rel_path).stem, self.name, self.version)


def _table_rows(table: Any) -> list[str]:
    """Each row as "Header: value; …" when the first row looks like headers, else cells joined."""
    rows = [[c.text.strip() for c in row.cells] for row in table.rows]
    if not rows:
        return []
    head, body = rows[0], rows[1:]
    if body and all(head):
        return ["; ".join(f"{h}: {v}" for h, v in zip(head, r, strict=False) if v) for r in body]
    return [" | ".join(c for c in r if c) for r in rows]
