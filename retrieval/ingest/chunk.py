"""The chunker (the seed's strategy E, plus the encoder-window rule).

Paragraphs are packed up to a character target; an oversized paragraph falls back
to sentence ends, then line breaks, then whitespace, then halving. No chunk crosses
a section. The contextual header ``[Title > Section]`` goes in front of the embedded
``text`` only; ``content`` is the chunk's own words and ``document.text[start:end]
== content`` always, because every boundary is a position found in the document by
a regex match, never a sum of lengths.

No embedded text may exceed the encoder's word-piece window: a piece that fits the
character target but not the window is split further, never truncated.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from retrieval.types import Chunk, Document, Section

TokenCounter = Callable[[str], int]

# Each level yields the end positions of its units inside a span: paragraphs end at
# a blank line, sentences at [.!?] followed by whitespace, lines at \n, words at spaces.
_LEVELS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\n[ \t]*\n\s*"),
    re.compile(r"[.!?]+[\"')\]]*\s+"),
    re.compile(r"\n"),
    re.compile(r"\s+"),
)


@dataclass(frozen=True)
class ChunkerConfig:
    target: int = 512
    overlap: int = 0
    header: bool = True
    boundaries: bool = True  # False = the seed's "blind" fixed-size cut
    window: int = 256  # encoder word-pieces, special tokens included

    @property
    def version(self) -> str:
        """Part of the pipeline stamp: a change re-chunks (and re-embeds) everything."""
        return f"chunk-v1:t{self.target}:o{self.overlap}:h{int(self.header)}:b{int(self.boundaries)}:w{self.window}"


def header_for(doc_title: str, section: str) -> str:
    return f"[{doc_title} > {section}]" if section else f"[{doc_title}]"


def chunk_document(doc: Document, cfg: ChunkerConfig, count_tokens: TokenCounter) -> list[Chunk]:
    """Split a document into chunks whose ``content`` slices back out of ``doc.text``."""
    chunks: list[Chunk] = []
    for sec in doc.sections:
        header = header_for(doc.title, sec.title) if cfg.header else ""
        splitter = _SpanSplitter(doc.text, header, cfg, count_tokens)
        spans = splitter.split(sec.start, sec.end) if cfg.boundaries else splitter.blind(sec.start, sec.end)
        for start, end in spans:
            chunks.append(_make_chunk(doc, sec, header, start, end, len(chunks), cfg))
    return chunks


def _make_chunk(
    doc: Document, sec: Section, header: str, start: int, end: int, ordinal: int, cfg: ChunkerConfig
) -> Chunk:
    content = doc.text[start:end]
    tail = doc.text[max(sec.start, start - cfg.overlap) : start] if cfg.overlap else ""
    body = f"{tail}{content}" if tail else content
    text = f"{header}\n{body}" if header else body
    digest = hashlib.sha1(f"{doc.path}\0{start}\0{end}\0{content}".encode()).hexdigest()[:16]
    return Chunk(
        id=f"{digest}-{ordinal}",
        path=doc.path,
        doc_title=doc.title,
        section=sec.title,
        ordinal=ordinal,
        text=text,
        content=content,
        start=start,
        end=end,
        meta=chunk_meta(doc, sec, start, end) | {"overlap_start": start - len(tail)},
    )


def chunk_meta(doc: Document, sec: Section, start: int, end: int) -> dict[str, Any]:
    """Locator facts for one chunk: the section's own (a page, a sheet, a slide), plus the
    *marks* it covers (spreadsheet rows, caption cues, as ``[offset, mark]`` found by
    position), so that a sentence inside it cites its own row or cue, and the first and last."""
    meta = {k: v for k, v in sec.meta.items() if k != "marks"}
    if doc.locator != "char":
        meta["locator"] = doc.locator
    marks = sec.meta.get("marks")
    if marks:
        offsets = [m[0] for m in marks]
        first = max(0, bisect.bisect_right(offsets, start) - 1)
        last = max(first, bisect.bisect_left(offsets, end) - 1)
        meta["mark_first"], meta["mark_last"] = marks[first][1], marks[last][1]
        meta["marks"] = marks[first : last + 1]
    return meta


class _SpanSplitter:
    """Splits one section body into (start, end) spans of trimmed, non-empty content."""

    def __init__(self, text: str, header: str, cfg: ChunkerConfig, count_tokens: TokenCounter) -> None:
        self.text = text
        self.header = header
        self.cfg = cfg
        self.count_tokens = count_tokens

    def fits(self, start: int, end: int) -> bool:
        start, end = self.trim(start, end)
        if end - start > self.cfg.target:
            return False
        return self.count_tokens(f"{self.header}\n{self.text[start:end]}") <= self.cfg.window

    def trim(self, start: int, end: int) -> tuple[int, int]:
        piece = self.text[start:end]
        lead = len(piece) - len(piece.lstrip())
        return start + lead, start + len(piece.rstrip()) if piece.strip() else start + lead

    def split(self, start: int, end: int, level: int = 0) -> list[tuple[int, int]]:
        start, end = self.trim(start, end)
        if start >= end:
            return []
        if level == 0 and self.fits(start, end):
            return [(start, end)]
        if level >= len(_LEVELS):
            return self.halve(start, end)
        units = list(self.units(start, end, level))
        if len(units) <= 1:
            return self.split(start, end, level + 1)
        out: list[tuple[int, int]] = []
        open_: tuple[int, int] | None = None
        for u_start, u_end in units:
            if open_ and self.fits(open_[0], u_end):
                open_ = (open_[0], u_end)
                continue
            if open_:
                out.extend(self.settle(*open_, level))
            open_ = (u_start, u_end)
        if open_:
            out.extend(self.settle(*open_, level))
        return out

    def settle(self, start: int, end: int, level: int) -> list[tuple[int, int]]:
        """A packed group that fits is one chunk; a lone unit that does not is split finer."""
        if self.fits(start, end):
            s, e = self.trim(start, end)
            return [(s, e)] if s < e else []
        return self.split(start, end, level + 1)

    def units(self, start: int, end: int, level: int) -> Iterator[tuple[int, int]]:
        pos = start
        for m in _LEVELS[level].finditer(self.text, start, end):
            if m.end() > pos:
                yield pos, m.end()
                pos = m.end()
        if pos < end:
            yield pos, end

    def halve(self, start: int, end: int) -> list[tuple[int, int]]:
        """Last resort for a run with no whitespace (a hash, base64): cut in halves until it fits."""
        start, end = self.trim(start, end)
        if start >= end:
            return []
        if self.fits(start, end) or end - start == 1:
            return [(start, end)]
        mid = (start + end) // 2
        return self.halve(start, mid) + self.halve(mid, end)

    def blind(self, start: int, end: int) -> list[tuple[int, int]]:
        """The seed's strategy A: a cut every ``target`` characters, blind to the text."""
        out: list[tuple[int, int]] = []
        for s in range(start, end, self.cfg.target):
            out.extend(self.halve(s, min(end, s + self.cfg.target)))
        return out


_SENTENCE_OR_LINE = re.compile(r"[.!?]+[\"')\]]*\s+|\n\s*")
# A line that ends a unit of its own: a sentence stop (or a colon/semicolon) at its end,
# a heading, a table row.
_LINE_ENDS_UNIT = re.compile(r"([.!?:;][\"')\]*_`]*|^\s*(#|\|).*)$")
# A line that starts a unit of its own: a list item, heading, quote, table row, tag.
_LINE_STARTS_UNIT = re.compile(r"\s*([-*+]\s|\d{1,3}[.)]\s|#|>|\||<)")  # "2019. It" is a year
# Words whose stop abbreviates and does not end a sentence when the text goes on in lower
# case or a number ("f.eks. moms", "ca. 5", "e.g. the"); and a number's ("1. juli": a Danish
# date, an ordinal). Before a capital such a stop still ends one ("… mv. Derefter").
ABBREVIATIONS = frozenset(
    [
        "f.eks",
        "bl.a",
        "jf",
        "ca",
        "mv",
        "osv",
        "nr",
        "evt",
        "inkl",
        "ekskl",
        "pkt",
        "stk",
        "dvs",
        "iht",
        "mht",
        "vedr",
        "pga",
        "ifm",
        "hhv",
        "m.m",
        "o.l",
        "kl",
        "e.g",
        "i.e",
        "cf",
        "vs",
        "approx",
        "etc",
        "no",
        "fig",
    ]
)
_WORD_BEFORE = re.compile(r"(\S+)$")
_RULE_LINE = re.compile(r"\s*([-=*_])(\s*\1){2,}\s*")  # a thematic break, or a Setext heading's underline
_FENCE_LINE = re.compile(r"^[ \t]*(```|~~~)", re.M)  # a line of its own ends a unit, and so does each line inside
_QUOTED = re.compile(r"\s*>[ \t]?")
# Locators whose sources are one record per line (a sheet's rows, a slide's bullets, a
# caption's cues): there every line stays its own unit.
LINE_LOCATORS = frozenset({"sheet", "slide", "t"})


def sentence_spans(content: str, min_chars: int = 12, lines: bool = False) -> list[tuple[int, int]]:
    """(start, end) of each sentence (and list item, table row or code line) inside ``content``.

    A line break inside a sentence is a soft wrap (prose wrapped at 80 columns, a PDF's
    lines) and does not end it: a break ends a unit only after a stop, colon or
    semicolon, before a list item, heading, quote, table row or tag, at a blank line,
    and at every line of a code fence. A list item's number ("2.") is not a sentence
    stop. With ``lines`` every line break and every stop ends one (see
    :data:`LINE_LOCATORS`).

    Positions are found by the regex, never summed, so ``content[start:end]`` is the
    sentence exactly: a citation's evidence range slices the document to its quote.
    Fragments shorter than ``min_chars`` carry no meaning of their own and are dropped;
    a chunk with none left is represented by its whole (trimmed) content.
    """
    out: list[tuple[int, int]] = []
    pos = 0
    fenced = _fence_state(content)
    for m in _SENTENCE_OR_LINE.finditer(content):
        if not lines and (_list_number(content, m) or _abbreviated(content, m) or _soft_wrap(content, m, fenced)):
            continue
        span = _trimmed(content, pos, m.end())
        pos = m.end()
        if span[1] - span[0] >= min_chars:
            out.append(span)
    tail = _trimmed(content, pos, len(content))
    if tail[1] - tail[0] >= min_chars:
        out.append(tail)
    return out or [_trimmed(content, 0, len(content))]


def _fence_state(content: str) -> Callable[[int], bool]:
    """Whether a position lies in a code fence (from the fence lines seen in ``content``)."""
    toggles = [m.start() for m in _FENCE_LINE.finditer(content)]
    return lambda at: bisect.bisect_right(toggles, at) % 2 == 1


def _list_number(content: str, m: re.Match[str]) -> bool:
    """Whether the stop matched by ``m`` only numbers a list item ("2. Select …")."""
    if m.group()[0] != "." or "\n" in m.group():
        return False  # a stop at a line's end, or before a blank line, ends what it ends
    number = content[content.rfind("\n", 0, m.start()) + 1 : m.start()].strip()
    return number.isdigit() and len(number) <= 3


def _abbreviated(content: str, m: re.Match[str]) -> bool:
    """Whether the stop matched by ``m`` closes an abbreviation or a number, and the sentence
    goes on (in lower case or with a number) on the same line."""
    gap = m.group()
    if gap[0] != "." or "\n" in gap or not gap[1:].isspace():
        return False
    nxt = content[m.end() : m.end() + 1]
    if not (nxt.islower() or nxt.isdigit()):
        return False
    word = _WORD_BEFORE.search(content, 0, m.start())
    if word is None:
        return False
    w = word.group(1).lstrip("([\"'").lower()
    return (w.isdigit() and len(w) <= 2) or w in ABBREVIATIONS


def _soft_wrap(content: str, m: re.Match[str], fenced: Callable[[int], bool]) -> bool:
    """Whether the line break matched by ``m`` only wraps a sentence that goes on."""
    gap = m.group()
    if gap[0] != "\n" or gap.count("\n") > 1 or m.end() >= len(content):
        return False  # a sentence stop, a blank line, or the end
    line = content[content.rfind("\n", 0, m.start()) + 1 : m.start()]
    nxt_end = content.find("\n", m.end())
    nxt = content[m.end() : nxt_end if nxt_end != -1 else len(content)]
    if fenced(m.start()) or any(p.match(x) for p in (_FENCE_LINE, _RULE_LINE) for x in (line, nxt)):
        return False
    quoted = bool(_QUOTED.match(line)), bool(_QUOTED.match(nxt))
    if quoted[0] != quoted[1]:
        return False  # a quote begins or ends
    if quoted[0]:  # a quote wrapped over "> " lines
        line, nxt = _QUOTED.sub("", line, count=1), _QUOTED.sub("", nxt, count=1)
    return not _LINE_ENDS_UNIT.search(line.rstrip()) and not _LINE_STARTS_UNIT.match(nxt)


def chunk_sentence_spans(chunk: Chunk, min_chars: int = 12) -> list[tuple[int, int]]:
    """:func:`sentence_spans` of a chunk's content, by the rule of its document's format."""
    return sentence_spans(chunk.content, min_chars, lines=chunk.meta.get("locator") in LINE_LOCATORS)


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    piece = text[start:end]
    lead = len(piece) - len(piece.lstrip())
    return start + lead, start + lead + len(piece.strip())


def sentences(chunk: Chunk, min_chars: int = 12) -> list[str]:
    """A chunk's sentences, embedded at index time for best-sentence scoring."""
    return [chunk.content[a:b] for a, b in chunk_sentence_spans(chunk, min_chars)]


_HEADING = re.compile(r"#{1,6}\s+\S")
_QUESTION_END = re.compile(r"\?[\"')\]*_`]*\s*\Z")


def is_question(text: str) -> bool:
    """A sentence that asks (ends in a question mark, quotes and markup aside)."""
    return bool(_QUESTION_END.search(text))


def is_heading(text: str) -> bool:
    """A Markdown heading line on its own (``## Setup``), the only thing in the sentence."""
    stripped = text.strip()
    return bool(_HEADING.match(stripped)) and "\n" not in stripped


def is_evidence(text: str) -> bool:
    """Whether a sentence can back an answer: a heading says what a section is about, never
    what it says, and a question the source asks (an exercise, an FAQ's) answers nothing."""
    return not is_heading(text) and not is_question(text)
