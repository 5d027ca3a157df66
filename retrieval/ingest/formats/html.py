"""HTML: the main text (no scripts, navigation or footers), headings as sections, ``#char``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING

from retrieval.errors import ExtractionError
from retrieval.ingest.formats.builder import TextBuilder
from retrieval.ingest.text import decode_text
from retrieval.types import Document

if TYPE_CHECKING:
    from bs4 import Tag

_DROP = ("script", "style", "noscript", "nav", "header", "footer", "aside", "form", "template", "svg")
# Elements that end one paragraph and begin another. Text anywhere else (a <div> with no <p>,
# words loose in <body>, <span>s) belongs to the paragraph of the nearest of them around it.
# fmt: off
_BLOCKS = frozenset({
    "address", "article", "blockquote", "body", "caption", "dd", "details", "dialog", "div", "dl", "dt",
    "fieldset", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hgroup", "hr", "html", "li",
    "main", "ol", "p", "pre", "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
})
# fmt: on
_SECTION = ("h2", "h3")
_BREAK = "\ue000"  # a <br> while whitespace is folded: a private-use character no page holds


@dataclass(frozen=True)
class HtmlExtractor:
    name: str = "html"
    version: str = "2"  # 2: text outside <p>, <li>, <td>… is read too
    suffixes: tuple[str, ...] = (".html", ".htm")
    isolated: bool = True

    def extract(self, rel_path: str, data: bytes) -> Document:
        from bs4 import BeautifulSoup

        soup = BeautifulSoup(decode_text(data), "lxml")
        for tag in soup(_DROP):
            tag.decompose()
        for tag in soup.find_all(hidden=True):
            tag.decompose()
        root = soup.find("main") or soup.find("article") or soup.body or soup
        title = soup.title.get_text(" ", strip=True) if soup.title else ""
        b = TextBuilder()
        section, paras = "", list[str]()
        for kind, text in _paragraphs(root):
            if kind == "h1":
                title = title or text
            elif kind in _SECTION:
                b.section(section, paras)
                section, paras = text, []
            else:
                paras.append(text)
        b.section(section, paras)
        if b.empty:
            raise ExtractionError("no text: the page has no readable content")
        return b.document(rel_path, title or PurePath(rel_path).stem, self.name, self.version)


def _paragraphs(root: Tag) -> Iterator[tuple[str, str]]:
    """(the enclosing block's tag name, its text) for each run of text in document order.
    Iterative (``descendants``), so a deeply nested page cannot exhaust the stack."""
    from bs4 import NavigableString, Tag

    blocks: dict[int, Tag] = {}  # a parent's id -> its nearest enclosing block
    current: Tag | None = None
    parts: list[str] = []
    for node in root.descendants:
        if isinstance(node, Tag):
            if node.name == "br":
                parts.append(_BREAK)
            continue
        if type(node) is not NavigableString or node.parent is None:
            continue  # comments, doctypes, CDATA and processing instructions are not text
        block = _block_of(node.parent, root, blocks)
        if block is not current:
            yield from _finish(current, parts)
            current, parts = block, []
        parts.append(str(node))
    yield from _finish(current, parts)


def _block_of(parent: Tag, root: Tag, cache: dict[int, Tag]) -> Tag:
    found = cache.get(id(parent))
    if found is None:
        el = parent
        while el is not root and el.name not in _BLOCKS and el.parent is not None:
            el = el.parent
        found = cache[id(parent)] = el
    return found


def _finish(block: Tag | None, parts: list[str]) -> Iterator[tuple[str, str]]:
    if block is None or not parts:
        return
    raw = "".join(parts)
    if block.name == "pre":
        text = raw.replace(_BREAK, "\n").strip("\n")
    else:
        lines = (" ".join(line.split()) for line in " ".join(raw.split()).split(_BREAK))
        text = "\n".join(line for line in lines if line)
    if text.strip():
        yield block.name, text
