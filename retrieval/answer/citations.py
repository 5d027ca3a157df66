"""Server-side citations: the model writes only [n]; everything else is attached here.

``neutralise`` removes what the model must never get through to a reader: links,
Slack control sequences and mentions. Citation numbers are the answer format's business
(``retrieval.answer.prompt``): only source sentences can be cited, and they are renumbered.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from retrieval.answer.evidence import SourceSentence
from retrieval.answer.links import SignLink, text_digest
from retrieval.ingest import without_planted
from retrieval.types import Hit

_SLACK_SEQ = re.compile(r"<[!@#][^>]*>")
_SLACK_LINK = re.compile(r"<(?:https?|mailto|ftp|file|slack)[^|>]*(?:\|([^>]*))?>", re.IGNORECASE)
_MD_LINK = re.compile(r"\[([^\]]+)\]\((?:[^)]*)\)")
_URL = re.compile(r"(?:https?://|ftp://|file://|www\.)\S+", re.IGNORECASE)
BROADCAST = re.compile(r"@(channel|here|everyone)\b", re.IGNORECASE)
_REFUSAL = re.compile(
    r"\b(do(?:es)? not|don't|doesn't) (contain|mention|include|provide|say|cover|specify)|"
    r"\bnot (mentioned|provided|covered|specified|stated) in\b|"
    r"\bno (relevant )?information\b|\b(can ?not|can't|unable to) (find|answer|determine)\b|"
    r"\bI don't know\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Citation:
    n: int
    path: str
    doc: str
    section: str
    start: int
    end: int
    quote: str  # the source's own words (the evidence sentence, or the chunk's content), never embedded text
    url: str
    locator: str
    label: str
    distance: float
    where: dict[str, Any] = field(default_factory=dict)  # page / sheet+range / start+end / slide
    passage: tuple[int, int] | None = None  # the range of the whole passage the evidence sits in
    best: tuple[int, int] | None = None  # a pointer's best sentence, inside its excerpt


MEDIA = (".mp4", ".m4v", ".mov", ".webm", ".mkv", ".mp3", ".m4a", ".wav", ".ogg", ".opus")


def _secs(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".")


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02}:{s % 60:02}" if s >= 3600 else f"{s // 60}:{s % 60:02}"


def _marks_within(marks: list[list[Any]], span: tuple[int, int]) -> tuple[Any, Any]:
    """The first and last marks (rows, cues) that ``span`` covers, found by position."""
    offsets = [m[0] for m in marks]
    first = max(0, bisect.bisect_right(offsets, span[0]) - 1)
    last = max(first, bisect.bisect_left(offsets, span[1]) - 1)
    return marks[first][1], marks[last][1]


def locator_for(
    hit: Hit, span: tuple[int, int] | None = None, focus: tuple[int, int] | None = None
) -> tuple[str, str, dict[str, Any]]:
    """(URL fragment, human label, structured place) for where ``span`` (default: the whole
    passage) sits in its document: its own rows and caption cues when the passage records
    them (a line-based format's sentence is one row or one cue), its page or slide. A page
    is the one ``focus`` (the cited sentence inside a quoted span) starts on, when given: the
    sentences quoted around it may begin on the page before."""
    c = hit.chunk
    m = c.meta
    kind = m.get("locator", "char")
    first, last = m.get("mark_first"), m.get("mark_last")
    if span is not None and m.get("marks"):
        first, last = _marks_within(m["marks"], focus if kind == "page" and focus else span)
    if kind == "page":  # a PDF section cut at headings marks each page it goes over
        page = first if first is not None else m["page"]
        return f"#page={page}", f"p. {page}", {"page": page}
    if kind == "slide":
        return f"#slide={m['slide']}", f"slide {m['slide']}", {"slide": m["slide"]}
    if kind == "sheet" and first is not None:
        rng = f"A{first}:{m.get('last_col', 'A')}{last}"
        return f"#sheet={quote(m['sheet'])}&range={rng}", f"{m['sheet']}!{rng}", {"sheet": m["sheet"], "range": rng}
    if kind == "t" and first is not None and last is not None:
        start, end = float(first[0]), float(last[1])
        return f"#t={_secs(start)},{_secs(end)}", f"{_clock(start)}–{_clock(end)}", {"start": start, "end": end}
    a, b = span or (c.start, c.end)
    return f"#char={a},{b}", c.section or c.doc_title, {}


def media_beside(path: str, docs_dir: Path | None) -> str:
    """A transcript's recording: the media file with the same stem in the same folder, if any."""
    if docs_dir is None:
        return path
    p = PurePosixPath(path)
    for ext in MEDIA:
        if (docs_dir / p.with_suffix(ext)).is_file():
            return str(p.with_suffix(ext))
    return path


@dataclass(frozen=True)
class Linker:
    """Where citation links point: the drive's own URL when configured (``docs_url``), else
    Footnote's viewer (``viewer_url``, links signed by ``sign``), else a file:// URI under
    ``docs_dir``; the locator always follows."""

    docs_url: str | None = None
    docs_dir: Path | None = None
    viewer_url: str | None = None
    sign: SignLink | None = None

    def url(self, path: str, locator: str, span: tuple[int, int] | None = None, cited: str | None = None) -> str:
        """The link to ``span`` of ``path``; ``cited``, the words the span holds, lets the
        viewer tell when an edit has moved them."""
        rel = quote(path)
        if self.docs_url:
            return f"{self.docs_url.rstrip('/')}/{rel}{locator}"
        if self.viewer_url:
            if self.sign is not None:
                start, end = span or (None, None)
                words = text_digest(cited) if span and cited is not None else None
                query = "?" + self.sign(path, start, end, words)
            else:
                query = f"?from={span[0]}&to={span[1]}" if span else ""
            return f"{self.viewer_url.rstrip('/')}/view/{rel}{query}{locator}"
        base = (self.docs_dir or Path(".")).resolve()
        return f"{(base / path).as_uri()}{locator}"


def make_citations(hits: list[Hit], links: Linker) -> list[Citation]:
    """Citations of whole passages (the sources consulted when the model found no answer),
    quoted without any instruction planted in them."""
    return [
        cite(i, h, (h.chunk.start, h.chunk.end), without_planted(h.chunk.content), links)
        for i, h in enumerate(hits, start=1)
    ]


def cite_evidence(n: int, ev: SourceSentence, links: Linker) -> Citation:
    """A citation of one evidence sentence: its own range, quote and link."""
    passage = (ev.hit.chunk.start, ev.hit.chunk.end)
    return cite(n, ev.hit, (ev.start, ev.end), ev.text, links, passage)


def cite(
    n: int,
    h: Hit,
    span: tuple[int, int],
    quote: str,
    links: Linker,
    passage: tuple[int, int] | None = None,
    focus: tuple[int, int] | None = None,
) -> Citation:
    """A citation of ``span`` (with its own words ``quote``) inside the passage ``h``.

    Each format points at the span itself: its characters (``#char=``), its own sheet
    rows, its own caption cues' time range, its page or its slide (the page of ``focus``, the
    sentence the quote is for, when given).
    """
    c = h.chunk
    loc, label, where = locator_for(h, span, focus)
    a, b = span[0] - c.start, span[1] - c.start
    cited = c.content[a:b] if 0 <= a <= b <= len(c.content) else None  # the canonical words, as the viewer reads them
    # A transcript's time range opens the recording beside it (the viewer shows the text).
    target = media_beside(c.path, links.docs_dir) if "start" in where and not links.viewer_url else c.path
    return Citation(
        n,
        c.path,
        c.doc_title,
        c.section,
        span[0],
        span[1],
        quote,
        links.url(target, loc, span, cited),
        loc,
        label,
        h.distance,
        where,
        passage,
    )


def neutralise(text: str) -> str:
    """Remove links, Slack control sequences and broadcast mentions from model text."""
    text = _SLACK_LINK.sub(lambda m: m.group(1) or "", text)
    text = _SLACK_SEQ.sub("", text)
    text = _MD_LINK.sub(r"\1", text)
    text = _URL.sub("", text)
    text = BROADCAST.sub(r"\1", text)
    return text


def says_not_found(text: str) -> bool:
    """The model said the sources do not contain the answer."""
    return bool(_REFUSAL.search(text))


def find_passage(source: str, candidates: list[Citation]) -> Citation | None:
    """The candidate a citation's or a pointer's ``url`` or ``locator`` (as ``--json`` printed
    it) names: the same url or locator, or the same document and locator (a signed viewer
    link's query changes with time; its path and fragment do not). The first wins (pointers
    come first: a page or a slide holds many sentences)."""
    source = source.strip()
    exact = [c for c in candidates if source in (c.url, c.locator)]
    if exact:
        return exact[0]
    base, _, fragment = source.partition("#")
    if not fragment:
        return None
    where = unquote(urlsplit(base).path)
    for c in candidates:
        if c.locator == f"#{fragment}" and (where == c.path or where.endswith("/" + c.path)):
            return c
    return None
