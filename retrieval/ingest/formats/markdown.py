"""Markdown and plain text: ``##`` sections, front matter read for the title (never a passage)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath

from retrieval.errors import ExtractionError
from retrieval.ingest.markup import plain
from retrieval.ingest.text import canonical, decode_text
from retrieval.types import Document, Section

_FENCE = re.compile(r"^(```|~~~)")

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
