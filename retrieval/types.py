"""Plain data passed between pipeline steps: documents, sections, chunks, hits."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")  # line breaks, tabs and other controls


def one_line(title: str) -> str:
    """A title as one line: a file name or a PDF's metadata may hold a newline, a tab or a
    control character, which would split a `status` line or a Slack link's label."""
    return _BREAKS.sub(" ", title).strip() if _BREAKS.search(title) else title


@dataclass(frozen=True)
class Section:
    """A span of a document's canonical text that no chunk may cross.

    ``start``/``end`` delimit the body (for Markdown: after the ``## `` line).
    ``meta`` carries format-specific locator facts (a PDF page, a sheet) onto chunks.
    """

    title: str
    start: int
    end: int
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "title", one_line(self.title))


@dataclass(frozen=True)
class Document:
    """An extracted document: the canonical text every offset refers to."""

    path: str  # relative to the docs folder, POSIX separators
    title: str
    text: str
    sections: tuple[Section, ...]
    extractor: str
    extractor_version: str
    locator: str = "char"  # how citations point into it: char, page, t, sheet, slide

    def __post_init__(self) -> None:
        object.__setattr__(self, "title", one_line(self.title))


@dataclass(frozen=True)
class Chunk:
    """One retrievable unit.

    ``text`` is what gets embedded (header + content); ``content`` is only this
    chunk's own words, exactly ``document.text[start:end]``, and is what is quoted.
    """

    id: str
    path: str
    doc_title: str
    section: str
    ordinal: int
    text: str
    content: str
    start: int
    end: int
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Hit:
    """A chunk returned by search, with the signals that ranked it."""

    chunk: Chunk
    score: float
    distance: float  # cosine distance of the chunk vector to the query
    signals: dict[str, float] = field(default_factory=dict)
