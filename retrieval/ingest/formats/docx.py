"""Word (DOCX): headings become sections, tables become text rows, ``#char`` locators."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from retrieval.errors import ExtractionError
from retrieval.ingest.formats.archive import check_zip
from retrieval.ingest.formats.builder import TextBuilder, meant_title, title_rows
from retrieval.types import Document


@dataclass(frozen=True)
class DocxExtractor:
    name: str = "docx"
    version: str = "3"  # 2: content controls, tracked insertions, text boxes, notes; a caption row; 3: made-up
    # titles, and a Title paragraph never a passage
    suffixes: tuple[str, ...] = (".docx",)
    isolated: bool = True

    def extract(self, rel_path: str, data: bytes) -> Document:
        import docx

        check_zip(data, "Word document")
        try:
            d = docx.Document(io.BytesIO(data))
        except Exception as exc:
            raise ExtractionError(f"corrupt Word document: {exc}") from exc
        title = meant_title(d.core_properties.title)
        b = TextBuilder()
        section, paras = "", list[str]()
        for style, text in _blocks(d, d.element.body):
            if style == "Title":  # the document's name (the header's), never a passage
                title = title or text
            elif style.startswith("Heading"):
                b.section(section, paras)
                section, paras = text, []
            else:
                paras.append(text)
        b.section(section, paras)
        for kind, notes in _notes(d):
            b.section(kind, notes)
        if b.empty:
            raise ExtractionError("no text: the Word document is blank")
        return b.document(rel_path, title or PurePath(rel_path).stem, self.name, self.version)


def _blocks(d: Any, container: Any) -> Iterator[tuple[str, str]]:
    """(paragraph style, text) for each paragraph and table row in ``container``, in order:
    content controls (``w:sdt``, as forms and templates use) are entered, and a text box's
    paragraphs follow the paragraph that anchors it."""
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    for el in container.iterchildren():
        tag = _local(el)
        if tag == "p":
            style = Paragraph(el, d._body).style
            text, boxes = _paragraph_text(el)
            if text.strip():
                yield ((style.name if style is not None else "") or ""), text.strip()
            for box in boxes:
                yield from _blocks(d, box)
        elif tag == "tbl":
            yield from (("", row) for row in _table_rows(Table(el, d._body), d))
        elif tag in ("sdt", "sdtContent", "customXml"):
            yield from _blocks(d, el)


_NOTES = {"footnotes": "Footnotes", "endnotes": "Endnotes"}  # relationship type's last part -> section
_SEPARATORS = {"separator", "continuationSeparator", "continuationNotice"}  # the rule above the notes


def _notes(d: Any) -> Iterator[tuple[str, list[str]]]:
    """("Footnotes" or "Endnotes", each note's text): a policy's footnote ("Applies to permanent
    staff only") is the document's too. They live in parts of their own, which python-docx
    does not read; each becomes a section after the body."""
    from docx.oxml.ns import qn
    from docx.oxml.parser import parse_xml  # python-docx's parser: entities are not resolved

    for rel in d.part.rels.values():
        kind = _NOTES.get(rel.reltype.rsplit("/", 1)[-1])
        if kind is None or rel.is_external:
            continue
        part = rel.target_part
        root = getattr(part, "element", None)
        root = parse_xml(part.blob) if root is None else root
        texts = [
            " ".join(text for _, text in _blocks(d, note))
            for note in root.iterchildren()
            if note.get(qn("w:type")) not in _SEPARATORS
        ]
        if any(texts):
            yield kind, [t for t in texts if t]


# Never the document's current words: deleted or moved-away text (tracked changes), field
# codes ("TOC \\o"), and the fallback copy of a drawing, which repeats its text box.
_SKIP = {"del", "moveFrom", "instrText", "delInstrText", "Fallback"}
_CHARS = {"tab": "\t", "br": "\n", "cr": "\n", "noBreakHyphen": "-"}


def _paragraph_text(p: Any) -> tuple[str, list[Any]]:
    """The words of one ``w:p`` (tracked insertions included, deletions not), and the text
    boxes (``w:txbxContent``) inside it, whose paragraphs are read as paragraphs of their own."""
    out: list[str] = []
    boxes: list[Any] = []
    stack = list(reversed(list(p.iterchildren())))
    while stack:
        el = stack.pop()
        tag = _local(el)
        if tag in _SKIP:
            continue
        if tag == "txbxContent":
            boxes.append(el)
            continue
        if tag == "t":
            out.append(el.text or "")
        elif tag in _CHARS:
            out.append(_CHARS[tag])
        stack.extend(reversed(list(el.iterchildren())))
    return "".join(out), boxes


def _local(el: Any) -> str:
    """An element's tag without its namespace (comments and processing instructions have none)."""
    tag = el.tag
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _table_rows(table: Any, d: Any) -> list[str]:
    """Each row as "Header: value; …" when the first row looks like headers, else cells joined."""
    captions, rest = title_rows(
        (r for r in (_row_texts(row.cells, d) for row in table.rows) if any(r)), lambda row: row
    )
    titles = [next(c for c in r if c) for r in captions]  # a caption row is a line of its own
    rows = list(rest)
    if not rows:
        return titles
    head, body = rows[0], rows[1:]
    if body and all(head):
        return titles + ["; ".join(f"{h}: {v}" for h, v in zip(head, r, strict=False) if v) for r in body]
    return titles + [" | ".join(c for c in r if c) for r in rows]


def _row_texts(cells: Any, d: Any) -> list[str]:
    """A row's cell texts, one per grid column; a cell merged across columns is read once
    (python-docx repeats it for each column it spans), its other columns empty."""
    out, previous = [], None
    for c in cells:
        out.append("" if c._tc is previous else _cell_text(c, d))
        previous = c._tc
    return out


def _cell_text(cell: Any, d: Any) -> str:
    """A cell's paragraphs (content controls and tracked insertions included), one per line."""
    return "\n".join(text for _, text in _blocks(d, cell._tc)).strip()
