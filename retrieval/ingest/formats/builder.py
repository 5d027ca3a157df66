"""Builds canonical text section by section, recording exact offsets as it goes.

Every extractor that is not plain text produces its canonical text here, so that
section bounds and marks (rows, caption cues) are positions in the string that was
actually built, and ``document.text[start:end]`` always slices back the same words.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from retrieval.types import Document, Section

PARAGRAPH = "\n\n"
PAGE_BREAK = "\n\n\f\n\n"  # between PDF pages: a visible, unambiguous page separator


_LINE_BREAKS = str.maketrans({"\x0b": "\n", "\u2028": "\n", "\u2029": "\n", "\x00": None})


def clean(text: str) -> str:
    """Normalise line endings and strip the blank edges a parser leaves. A vertical tab is how
    python-pptx gives a line break inside a paragraph (Shift+Enter): a line break here too."""
    return text.replace("\r\n", "\n").replace("\r", "\n").translate(_LINE_BREAKS).strip()


# A title a program wrote instead of a person: the exporting app's name and file, a template's
# default ("PowerPoint Presentation", "Document1"), or a file name. A reader sees the slide's or
# the page's own title instead, and so should a passage's header.
_MADE_UP_TITLE = re.compile(
    r"^(?:microsoft (?:word|powerpoint|excel) - .*|powerpoint presentation|presentation\s*\d*|document\s*\d*"
    r"|untitled\b.*|slide\s*\d+|.*\.(?:docx?|pdf|pptx?|xlsx?|odt|rtf|txt))$",
    re.I,
)


def meant_title(title: object) -> str:
    """A document property's title as one line, or "" when a program made it up."""
    line = " ".join(str(title or "").split())
    return "" if _MADE_UP_TITLE.match(line) else line


T = TypeVar("T")
TITLE_ROWS = 20  # rows looked at for a table's header before its first row is taken as it


def title_rows(rows: Iterable[T], cells: Callable[[T], Sequence[str]]) -> tuple[list[T], Iterator[T]]:
    """A table's title or caption rows above its header ("Travel budget 2026", a cell merged
    across a Word table), and the rows from the header on. The header is the first row of two
    or more filled cells among the first ``TITLE_ROWS``; without one (a table of one column)
    there are no title rows and the first row is the header. Rows are read lazily: a sheet
    streams."""
    it = iter(rows)
    seen: list[T] = []
    for row in it:
        if sum(1 for c in cells(row) if c) >= 2:
            return seen, itertools.chain([row], it)
        seen.append(row)
        if len(seen) >= TITLE_ROWS:
            break
    return [], itertools.chain(seen, it)


class TextBuilder:
    def __init__(self, separator: str = PARAGRAPH) -> None:
        self.separator = separator
        self._parts: list[str] = []
        self._length = 0
        self.sections: list[Section] = []

    def _append(self, text: str) -> int:
        start = self._length
        self._parts.append(text)
        self._length += len(text)
        return start

    def section(
        self,
        title: str,
        paragraphs: Sequence[str],
        meta: dict[str, Any] | None = None,
        marks: Sequence[Any] | None = None,
        joins: Sequence[str] | None = None,
    ) -> bool:
        """Add one section of paragraphs (blank-line separated); ``marks[i]`` labels paragraph i,
        and ``joins[i]``, when given, is what comes between paragraph i and the one before it
        instead of a blank line (a PDF's sentence that goes on over a page break: one line break).

        Returns False (and adds nothing) when every paragraph is blank.
        """
        kept = [
            (clean(p), marks[i] if marks else None, joins[i] if joins else PARAGRAPH)
            for i, p in enumerate(paragraphs)
            if clean(p)
        ]
        if not kept:
            return False
        if self._length:
            self._append(self.separator)
        start = self._length
        offsets = []
        for i, (para, _, join) in enumerate(kept):
            if i:
                self._append(join)
            offsets.append(self._append(para))
        info = dict(meta or {})
        if marks:
            info["marks"] = [[off, mark] for off, (_, mark, _) in zip(offsets, kept, strict=True)]
        self.sections.append(Section(title, start, self._length, info))
        return True

    @property
    def empty(self) -> bool:
        return not self.sections

    def document(self, path: str, title: str, extractor: str, version: str, locator: str = "char") -> Document:
        return Document(path, title, "".join(self._parts), tuple(self.sections), extractor, version, locator)
