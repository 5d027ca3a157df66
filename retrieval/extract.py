"""Text extraction: turns a file's bytes into a :class:`Document` with canonical text.

Every extractor has a name and a version; both are stamped on the document in the
manifest so that an extractor change marks its documents stale.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Protocol

from charset_normalizer import from_bytes
from charset_normalizer.md import mess_ratio

from retrieval.errors import ExtractionError
from retrieval.markup import plain
from retrieval.types import Document, Section


class Extractor(Protocol):
    name: str
    version: str
    suffixes: tuple[str, ...]
    isolated: bool  # parsed in a worker process with time and memory limits

    def extract(self, rel_path: str, data: bytes) -> Document: ...


_FENCE = re.compile(r"^(```|~~~)")
_BOMS = (
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)


def decode_text(data: bytes) -> str:
    """Decode bytes as text: BOM, then UTF-8, then the detected encoding.

    Binary junk is refused rather than indexed as mojibake.
    """
    if not data:
        raise ExtractionError("empty file (0 bytes): nothing to index")
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return _checked(data.decode(codec))
    if b"\x00" in data[:8192]:
        raise ExtractionError("binary content (NUL bytes), not a text document")
    try:
        return _checked(data.decode("utf-8"))
    except UnicodeDecodeError:
        pass
    # Legacy files on a team drive are overwhelmingly Windows-1252/latin-1, and on short
    # texts the detector guesses wildly (latin-1 "smørrebrød" came back as Big5), so
    # cp1252 wins whenever it reads as clean text; the detector handles the rest.
    try:
        western = data.decode("cp1252")
        if mess_ratio(western) < 0.1:
            return _checked(western)
    except UnicodeDecodeError:
        pass
    best = from_bytes(data).best()
    if best is None:
        raise ExtractionError("binary content: no text encoding fits")
    return _checked(str(best))


def _checked(text: str) -> str:
    """Reject decoded text that is mostly control characters (a binary file in disguise)."""
    sample = text[:8192]
    controls = sum(1 for c in sample if ord(c) < 32 and c not in "\n\r\t\f")
    if sample and controls / len(sample) > 0.05:
        raise ExtractionError("binary content (control characters), not a text document")
    return text


def canonical(text: str) -> str:
    """The canonical text all offsets refer to: line endings normalised to ``\\n``."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


# A static-site page (Jekyll, Hugo, Eleventy, Docusaurus, Obsidian) opens with YAML
# between "---" lines or TOML between "+++" lines: the page's metadata, not its words.
_FRONT_MATTER = re.compile(r"\A(---|\+\+\+)[ \t]*\n(.*?\n)?(?:\1|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_FRONT_KEY = re.compile(r"[A-Za-z_][\w-]*[ \t]*[:=]")  # metadata opens with a key ("title:", "date =")
_FRONT_TITLE = re.compile(r"^title[ \t]*[:=][ \t]*(.*?)[ \t]*$", re.M)


def front_matter(text: str) -> tuple[int, str | None]:
    """Where a leading front-matter block ends (0 without one) and the page title it sets.

    Only a top-level ``title:`` (``title =`` in TOML) scalar is read; a block value
    (``title: |``) or an empty one sets none.
    """
    m = _FRONT_MATTER.match(text)
    block = (m.group(2) or "") if m else ""
    first = next((line for line in block.split("\n") if line.strip()), "")
    if not m or not _FRONT_KEY.match(first):
        return 0, None  # a page that opens with a "---" rule: its words are the page's
    t = _FRONT_TITLE.search(block)
    title = t.group(1).strip() if t else ""
    if len(title) >= 2 and title[0] == title[-1] and title[0] in "\"'":
        title = title[1:-1].strip()
    else:
        title = re.sub(r"\s+#.*\Z", "", title)  # an unquoted value's trailing comment
    return m.end(), (plain(title, block_marker=False) if title and title[0] not in "|>" else None)


def markdown_structure(text: str, fallback_title: str) -> tuple[str, tuple[Section, ...]]:
    """Title and ``## `` sections, ignoring headings in code fences.

    The title is the first ``# `` heading, else the front matter's ``title``, else the
    file name; both without their markup (a link in a heading is its text). Front
    matter is never a passage. Text before the first ``## `` is a
    section of its own with an empty title. A section's body starts after its heading
    line, so headings are never quoted.
    """
    body_start, meta_title = front_matter(text)
    title: str | None = None
    title_end = body_start  # the "# Title" line is the header's job, not a passage of its own
    heads: list[tuple[int, int, str]] = []  # (line start, body start, title)
    in_fence = False
    pos = body_start
    for line in text[body_start:].split("\n"):
        nxt = pos + len(line) + 1
        if _FENCE.match(line.lstrip()):
            in_fence = not in_fence
        elif not in_fence:
            if title is None and line.startswith("# "):
                title = plain(line[2:], block_marker=False)
                title_end = min(nxt, len(text)) if not heads else title_end
            elif line.startswith("## "):
                heads.append((pos, min(nxt, len(text)), plain(line[3:], block_marker=False)))
        pos = nxt
    sections: list[Section] = []
    first = heads[0][0] if heads else len(text)
    if text[title_end:first].strip():
        sections.append(Section("", title_end, first))
    for i, (_, body, name) in enumerate(heads):
        end = heads[i + 1][0] if i + 1 < len(heads) else len(text)
        sections.append(Section(name, body, end))
    return title or meta_title or fallback_title, tuple(sections)


@dataclass(frozen=True)
class MarkdownExtractor:
    """Markdown and plain text: decoded, line endings normalised, ``##`` sections, front
    matter (a static site's page metadata) read for the title and left out of the passages."""

    name: str = "markdown"
    version: str = "4"  # 2: front matter read for the title, never indexed; 3: headings without markup; 4: a "---" rule is not front matter
    suffixes: tuple[str, ...] = (".md", ".markdown", ".txt")
    isolated: bool = False

    def extract(self, rel_path: str, data: bytes) -> Document:
        text = canonical(decode_text(data))
        if not text.strip():
            raise ExtractionError("no text: the file is blank")
        title, sections = markdown_structure(text, PurePath(rel_path).stem)
        if not sections:
            raise ExtractionError("no text besides its title or front matter")
        return Document(rel_path, title, text, sections, self.name, self.version)


def _registry(ocr: bool = False) -> tuple[Extractor, ...]:
    # Imported here: the format modules import this one (decode_text).
    from retrieval.formats.docx import DocxExtractor
    from retrieval.formats.html import HtmlExtractor
    from retrieval.formats.pdf import PdfExtractor
    from retrieval.formats.sheet import CsvExtractor, XlsxExtractor
    from retrieval.formats.slides import PptxExtractor
    from retrieval.formats.transcript import TranscriptExtractor

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
