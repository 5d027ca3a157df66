"""Server-side citations: the model writes only [n]; everything else is attached here.

``clean_answer`` removes what the model must never get through to a reader: links,
Slack control sequences and mentions, and citation numbers that were not sources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from retrieval.types import Hit

_CITE_GROUP = re.compile(r"\[(\s*\d+\s*(?:[,;]\s*\d+\s*)*)\]")
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
    quote: str  # the chunk's own content, never its embedded text
    url: str
    locator: str
    label: str
    distance: float


@dataclass(frozen=True)
class Cleaned:
    text: str
    cited: list[int]  # source numbers actually cited, in first-use order
    dropped: int  # citation numbers removed because they were not sources


def locator_for(hit: Hit) -> tuple[str, str]:
    """(URL fragment, human label) for where the quote sits in its document."""
    c = hit.chunk
    label = f"{c.section}" if c.section else c.doc_title
    return f"#char={c.start},{c.end}", label


def link_for(path: str, locator: str, docs_url: str | None, docs_dir: Path | None) -> str:
    """The drive's own URL when configured, else a file:// URI; the locator always follows."""
    rel = quote(path)
    if docs_url:
        return f"{docs_url.rstrip('/')}/{rel}{locator}"
    base = (docs_dir or Path(".")).resolve()
    return f"{(base / path).as_uri()}{locator}"


def make_citations(hits: list[Hit], docs_url: str | None, docs_dir: Path | None) -> list[Citation]:
    out = []
    for i, h in enumerate(hits, start=1):
        loc, label = locator_for(h)
        c = h.chunk
        out.append(
            Citation(
                i,
                c.path,
                c.doc_title,
                c.section,
                c.start,
                c.end,
                c.content,
                link_for(c.path, loc, docs_url, docs_dir),
                loc,
                label,
                h.distance,
            )
        )
    return out


def neutralise(text: str) -> str:
    """Remove links, Slack control sequences and broadcast mentions from model text."""
    text = _SLACK_LINK.sub(lambda m: m.group(1) or "", text)
    text = _SLACK_SEQ.sub("", text)
    text = _MD_LINK.sub(r"\1", text)
    text = _URL.sub("", text)
    text = BROADCAST.sub(r"\1", text)
    return text


def clean_answer(raw: str, n_sources: int) -> Cleaned:
    """Neutralise the text and keep only citation numbers 1..n_sources."""
    text = neutralise(raw)
    cited: list[int] = []
    dropped = 0

    def fix(m: re.Match[str]) -> str:
        nonlocal dropped
        keep = []
        for part in re.split(r"[,;]", m.group(1)):
            n = int(part)
            if 1 <= n <= n_sources:
                keep.append(n)
                if n not in cited:
                    cited.append(n)
            else:
                dropped += 1
        return "".join(f"[{n}]" for n in keep)

    text = _CITE_GROUP.sub(fix, text)
    text = re.sub(r"[ \t]+([.,;:])", r"\1", text)
    text = re.sub(r"[ \t]{2,}", " ", text).strip()
    return Cleaned(text, cited, dropped)


def says_not_found(text: str) -> bool:
    """The model said the sources do not contain the answer."""
    return bool(_REFUSAL.search(text))
