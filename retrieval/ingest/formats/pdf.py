"""PDF: read page by page, as a reader reads it.

- **Page furniture is left out.** A line that a page repeats at its top or bottom, as at
  least half the pages do (a running header with the document's name, "Page 3 of 9",
  digits aside), is no passage: it would be quoted as evidence and split the sentence that
  goes on over the page break.
- **Headings make sections.** A line set in a font at least ``HEADING_SCALE`` times the
  body's size is a heading, as Word's and Google Docs' heading styles are; each starts a
  section, so a passage's header reads ``[Policy > 3. Meals]`` instead of ``[Policy > p. 2]``.
  A sentence that goes on over a page break stays one sentence. Every passage still cites
  the page it starts on (``#page=N``), and a sentence the page it is on.
- **Without headings** (one font size, or sizes pypdf cannot tell) each page is a section,
  so a chunk never spans two pages.
- **The title** is the file's metadata title unless a program made it up ("Microsoft Word -
  Policy.docx"), else the first page's largest heading, else the file name.
"""

from __future__ import annotations

import io
import logging
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from retrieval.errors import ExtractionError
from retrieval.ingest.formats.builder import PAGE_BREAK, PARAGRAPH, TextBuilder, meant_title
from retrieval.types import Document

# pypdf gives a font's ligature glyph as its own code point ("ﬁle", "oﬃce"), which no one types:
# a question's "file" would not find it, nor a quote read aloud. Letters, as a reader copies them.
LIGATURES = str.maketrans(
    {"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl", "\ufb05": "st", "\ufb06": "st"}
)
HEADING_SCALE = 1.15  # Word's Heading 2 is 13 pt over an 11 pt body (1.18); its Heading 3, 12 pt, stays text
HEADING_CHARS = 150  # a longer line in a large font is a pull quote or a banner, not a heading
BODY_SHARE = 0.2  # prose a fifth of the letters or more; a guide's headings hold under 6 %
EDGE_LINES = 2  # lines at a page's top and at its bottom where furniture is looked for
_DIGITS = re.compile(r"\d+")
_SENTENCE_END = re.compile(r"[.!?:;][\"')\]]*\s*\Z")


@dataclass(frozen=True)
class Line:
    text: str
    size: float = 0.0  # the font size most of its letters are set in; 0 when not known


def page_lines(page: Any) -> list[Line]:
    """A page's lines as pypdf reads them, each with its font size (scaled by the text and
    page matrices, as a reader sees it). Sizes are 0 when pypdf's pieces do not add up to its
    text."""
    runs: list[tuple[str, float]] = []

    def visit(text: str, cm: Sequence[float], tm: Sequence[float], _font: Any, size: float) -> None:
        try:  # a malformed matrix or size is no reason to lose the page's words: its size is unknown
            scaled = float(size) * math.hypot(tm[2], tm[3]) * math.hypot(cm[2], cm[3])
        except (TypeError, ValueError, IndexError):
            scaled = 0.0
        runs.append((text, scaled if math.isfinite(scaled) else 0.0))

    text = page.extract_text(visitor_text=visit) or ""
    if "".join(piece for piece, _ in runs) != text:
        return [Line(line) for line in text.split("\n")]
    lines: list[Line] = []
    letters: Counter[float] = Counter()
    parts: list[str] = []
    for piece, size in runs:
        for i, part in enumerate(piece.split("\n")):
            if i:
                lines.append(_line("".join(parts), letters))
                parts, letters = [], Counter()
            parts.append(part)
            letters[round(size * 2) / 2] += sum(1 for c in part if not c.isspace())
    lines.append(_line("".join(parts), letters))
    return lines


def _line(text: str, letters: Counter[float]) -> Line:
    sized = [(n, size) for size, n in letters.items() if n]
    return Line(text, max(sized)[1] if sized else 0.0)


def furniture(pages: list[list[Line]]) -> list[set[int]]:
    """Per page, the indexes of its furniture lines: among its first and last ``EDGE_LINES``
    lines with words, those that are at the edge of at least half the pages (and of two pages
    at least) in the same words and size. Digits may differ only as page numbers do ("Page 3
    of 9" on page 3): the first line of code on each page, or a table's rows, differ in
    their digits too, and they are text."""
    if len(pages) < 2:
        return [set() for _ in pages]
    seen: dict[tuple[str, float], list[tuple[int, int, str]]] = {}
    for number, lines in enumerate(pages, start=1):
        for i, key in _edges(lines).items():
            seen.setdefault(key, []).append((number, i, lines[i].text))
    need = max(2, math.ceil(len(pages) / 2))
    drop: list[set[int]] = [set() for _ in pages]
    for places in seen.values():
        if len({n for n, _, _ in places}) >= need and _numbered_as_pages([(n, t) for n, _, t in places]):
            for number, i, _ in places:
                drop[number - 1].add(i)
    # A page that is all "furniture" repeats its text (a one-line page, a deck's same slide):
    # that is its content, and nothing of it is dropped.
    return [d if any(line.text.strip() for i, line in enumerate(lines) if i not in d) else set()
            for d, lines in zip(drop, pages, strict=True)]  # fmt: skip


def _numbered_as_pages(places: list[tuple[int, str]]) -> bool:
    """The same words on every page, or words whose numbers differ from page to page as the
    page number does (at one place in the line, at a fixed offset from it, on 4 of 5 pages)."""
    if len({text for _, text in places}) == 1:
        return True
    numbers = [(page, [int(d) for d in _DIGITS.findall(text)]) for page, text in places]
    for j in range(min(len(found) for _, found in numbers)):
        offsets = Counter(found[j] - page for page, found in numbers)
        if offsets.most_common(1)[0][1] >= 0.8 * len(numbers):
            return True
    return False


def _edges(lines: list[Line]) -> dict[int, tuple[str, float]]:
    """Edge lines by what they say, digits aside, and their size: a title in the running
    header's words but a larger font is no furniture."""
    filled = [i for i, line in enumerate(lines) if line.text.strip()]
    picked = filled[:EDGE_LINES] + filled[-EDGE_LINES:]
    return {i: (_DIGITS.sub("#", " ".join(lines[i].text.split())).casefold(), lines[i].size) for i in picked}


def body_size(pages: list[list[Line]]) -> float:
    """The size the document's running text is set in (0 when not known): the largest of the
    sizes that hold at least ``BODY_SHARE`` of its letters. Not simply the commonest: in a
    technical guide the code, in a smaller fixed font, can hold more letters than the prose,
    and every line of prose would then pass for a heading."""
    letters: Counter[float] = Counter()
    for lines in pages:
        for line in lines:
            letters[line.size] += sum(1 for c in line.text if not c.isspace())
    letters.pop(0.0, None)
    total = sum(letters.values())
    common = [size for size, n in letters.items() if n >= BODY_SHARE * total]
    return max(common) if common else 0.0


def is_heading_line(line: Line, body: float) -> bool:
    """Set large enough over the body, short enough and in words: a heading."""
    words = " ".join(line.text.split())
    return (
        body > 0
        and line.size >= body * HEADING_SCALE
        and 2 <= len(words) <= HEADING_CHARS
        and any(c.isalpha() for c in words)
    )


@dataclass
class _Section:
    title: str
    pieces: list[tuple[int, list[str]]]  # (page number, its lines)
    size: float = 0.0  # its heading's font size


def sections(pages: list[list[Line]], drop: list[set[int]], body: float) -> tuple[list[_Section], str | None]:
    """The document cut at its headings (consecutive heading lines of one size are one
    heading), and its title: the heading that opens the document when it is set larger than
    every other heading."""
    out = [_Section("", [])]
    for number, lines in enumerate(pages, start=1):
        previous: Line | None = None
        for i, line in enumerate(lines):
            if i in drop[number - 1] or not line.text.strip():
                continue
            if is_heading_line(line, body):
                words = " ".join(line.text.split())
                if previous is not None and previous.size == line.size and not out[-1].pieces:
                    out[-1].title = f"{out[-1].title} {words}"  # a heading wrapped over two lines
                else:
                    out.append(_Section(words, [], line.size))
            else:
                section = out[-1]
                if not section.pieces or section.pieces[-1][0] != number:
                    section.pieces.append((number, []))
                section.pieces[-1][1].append(line.text)
            previous = line
    kept = [s for s in out if s.pieces or s.title]
    first = kept[0] if kept and kept[0].title else None  # a heading before any text
    if first is None or any(s.size >= first.size for s in kept[1:]):
        return kept, None
    return kept, first.title


def _build(pages: list[list[Line]], drop: list[set[int]], cut: list[_Section], title: str) -> TextBuilder:
    """The document's text: cut at headings when it has any, else one section per page. A
    heading that is the document's title names no section (the header carries it)."""
    if len(cut) < 2:
        b = TextBuilder(PAGE_BREAK)
        for number, lines in enumerate(pages, start=1):
            kept = [line.text for i, line in enumerate(lines) if i not in drop[number - 1]]
            b.section(f"p. {number}", ["\n".join(kept)], {"page": number})
        return b
    b = TextBuilder(PARAGRAPH)
    for s in cut:
        paragraphs = ["\n".join(lines) for _, lines in s.pieces]
        # A page that ends inside a sentence goes on in the next one: one line break between them.
        joins = [PARAGRAPH] + ["\n" if not _SENTENCE_END.search(p) else PAGE_BREAK for p in paragraphs[:-1]]
        if s.pieces:
            name = "" if s.title == title else s.title
            b.section(name, paragraphs, {"page": s.pieces[0][0]}, [n for n, _ in s.pieces], joins)
    return b


def _title(metadata: Any, first: str | None, rel_path: str) -> str:
    return meant_title(metadata.title if metadata else None) or first or PurePath(rel_path).stem


@dataclass(frozen=True)
class PdfExtractor:
    name: str = "pdf"
    version: str = "3"  # 2: typographic ligatures read as their letters; 3: furniture left out, headings
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
            pages = [[Line(ln.text.translate(LIGATURES), ln.size) for ln in page_lines(p)] for p in reader.pages]
            metadata = reader.metadata
        except ExtractionError:
            raise
        except FileNotDecryptedError as exc:
            raise ExtractionError("encrypted PDF: it needs a password to open") from exc
        except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
            raise ExtractionError(f"corrupt PDF: {exc}") from exc
        blank = [n for n, lines in enumerate(pages, start=1) if not any(ln.text.strip() for ln in lines)]
        if blank and self.ocr:
            from retrieval.ingest.formats.ocr import ocr_pages

            for n, text in ocr_pages(data, blank).items():
                pages[n - 1] = [Line(line) for line in text.split("\n")]
        drop = furniture(pages)
        cut, first = sections(pages, drop, body_size(pages))
        title = _title(metadata, first, rel_path)
        b = _build(pages, drop, cut, title)
        if b.empty:
            why = "OCR found no text either" if self.ocr else "OCR not enabled"
            raise ExtractionError(f"image-only PDF ({len(pages)} pages): no text layer; {why}")
        return b.document(rel_path, title, self.name, self.version, locator="page")
