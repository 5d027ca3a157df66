"""HTML: the main text (no scripts, navigation or footers), headings as sections, ``#char``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

from retrieval.errors import ExtractionError
from retrieval.ingest.formats.builder import TextBuilder
from retrieval.ingest.text import decode_text
from retrieval.types import Document

_DROP = ("script", "style", "noscript", "nav", "header", "footer", "aside", "form", "template", "svg")
_BLOCKS = ("p", "li", "pre", "blockquote", "td", "th", "dt", "dd", "figcaption", "h1", "h2", "h3", "h4", "h5", "h6")
_SECTION = ("h2", "h3")


@dataclass(frozen=True)
class HtmlExtractor:
    name: str = "html"
    version: str = "1"
    suffixes: tuple[str, ...] = (".html", ".htm")
    isolated: bool = True

    def extract(self, rel_path: str, data: bytes) -> Document:
        from bs4 import BeautifulSoup

        soup = BeautifulSoup(decode_text(data), "lxml")
        for tag in soup(_DROP):
            tag.decompose()
        root = soup.find("main") or soup.find("article") or soup.body or soup
        title = soup.title.get_text(" ", strip=True) if soup.title else ""
        b = TextBuilder()
        section, paras = "", list[str]()
        for el in root.find_all(_BLOCKS):
            if el.name not in _SECTION and el.find_parent(_BLOCKS) is not None:
                continue  # already part of an enclosing block's text
            text = el.get_text("\n" if el.name == "pre" else " ", strip=el.name != "pre")
            if el.name == "h1":
                title = title or text
            elif el.name in _SECTION:
                b.section(section, paras)
                section, paras = text, []
            elif text.strip():
                paras.append(text)
        b.section(section, paras)
        if b.empty:
            raise ExtractionError("no text: the page has no readable content")
        return b.document(rel_path, title or PurePath(rel_path).stem, self.name, self.version)
