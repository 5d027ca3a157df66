"""Excerpts: a sentence quoted with the sentences around it, for pointers and for citations.

Pointers are the closest passages, shown when Footnote is not sure the docs answer.

No model is called. Each pointer is one passage's most relevant sentence (the answer's own
sentence ranker, :func:`retrieval.answer.evidence.relevance`) with the sentences around it,
quoted exactly with its own range and link: the neighbours join, the more relevant first,
while the excerpt stays within ``POINTER_CHARS``, which nearly always is the whole passage.
The best sentence alone often is not the one that answers a chatty message: measured on dev
and guides (docs/measurements.md, "Three outcomes"), the best sentence put the needle in
front of the reader for 17 and 5 of 32 chatty messages, 400 characters around it for 21 and
15, the whole passage for 21 and 18 (direct questions: 27 and 26, 31 and 32, 31 and 32). A
pointer says it is not an answer; what it owes the reader is the passage, with the best
sentence's own range kept (``best``), so it can be shown in bold. A sentence planted for an assistant,
a heading or a question is never a pointer's best sentence, and planted text never joins.

An answer's citation is quoted the same way around the sentence it cites (:func:`in_context`),
within ``EXCERPT_CHARS``:
the 0.5B often cites the sentence that repeats the question ("It might be useful to test your
policies before letting them loose") rather than the next one, which answers it ("To do this,
use the Content-Security-Policy-Report-Only header"). The support check still reads the cited
sentence alone; the reader sees it in bold, with what surrounds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from retrieval.answer.citations import Citation, Linker, cite, cite_evidence
from retrieval.answer.evidence import SourceSentence, VectorsOf, most_relevant, number_sentences, relevance
from retrieval.ingest import is_planted
from retrieval.types import Hit

POINTERS = 3
EXCERPT_CHARS = 400  # a citation's excerpt
POINTER_CHARS = 600  # a pointer's: its passage, nearly always whole


@dataclass(frozen=True)
class Excerpt:
    start: int
    end: int
    best: tuple[int, int]  # the best sentence's own range inside it


def excerpt(
    sentences: Sequence[SourceSentence],
    best: SourceSentence,
    query: np.ndarray | None,
    idf: dict[str, float],
    limit: int = EXCERPT_CHARS,
) -> Excerpt:
    """``best`` and its neighbours, the more relevant side first, within ``limit`` characters."""
    i = next(k for k, s in enumerate(sentences) if s.start == best.start and s.end == best.end)
    lo = hi = i
    a, b = best.start, best.end
    while True:
        sides = [k for k in (lo - 1, hi + 1) if 0 <= k < len(sentences)]
        sides = [k for k in sides if not is_planted(sentences[k].hit.chunk, sentences[k].start, sentences[k].end)]
        grown = False
        for k in sorted(sides, key=lambda k: -relevance(sentences[k], query, idf)):
            na, nb = min(a, sentences[k].start), max(b, sentences[k].end)
            if nb - na <= limit:
                a, b, lo, hi, grown = na, nb, min(lo, k), max(hi, k), True
                break
        if not grown:
            return Excerpt(a, b, (best.start, best.end))


def point_at(
    hits: Sequence[Hit],
    query: np.ndarray | None,
    idf: dict[str, float],
    vectors_of: VectorsOf | None,
    links: Linker,
    n: int = POINTERS,
) -> list[Citation]:
    """Up to ``n`` pointers, one per passage, in the order of ``hits``; a passage whose best
    sentence another pointer already quotes is skipped."""
    out: list[Citation] = []
    seen: set[tuple[str, int, int]] = set()
    for hit in hits:
        if len(out) == n:
            break
        sentences = number_sentences([hit], vectors_of)
        best = most_relevant(sentences, query, 1, idf)
        if not best:
            continue  # nothing but planted text
        full = next(s for s in sentences if s.start == best[0].start)
        ex = excerpt(sentences, full, query, idf, POINTER_CHARS)
        if (hit.chunk.path, ex.start, ex.end) in seen:
            continue
        seen.add((hit.chunk.path, ex.start, ex.end))
        out.append(_quoted(len(out) + 1, hit, ex, links))
    return out


def in_context(
    n: int,
    ev: SourceSentence,
    query: np.ndarray | None,
    idf: dict[str, float],
    vectors_of: VectorsOf | None,
    links: Linker,
    sentences: Sequence[SourceSentence] | None = None,
) -> Citation:
    """A citation of the evidence sentence ``ev`` quoted with its neighbours (``best`` is its
    own range); ``sentences``: its passage's, when the caller numbered them already. Evidence
    that is not one sentence of its passage (a span a teammate confirmed) is quoted as it is:
    that is what was confirmed."""
    if sentences is None:
        sentences = number_sentences([ev.hit], vectors_of)
    full = next((s for s in sentences if s.start == ev.start and s.end == ev.end), None)
    if full is None or is_planted(ev.hit.chunk, ev.start, ev.end):
        return cite_evidence(n, ev, links)
    return _quoted(n, ev.hit, excerpt(sentences, full, query, idf), links)


def _quoted(n: int, hit: Hit, ex: Excerpt, links: Linker) -> Citation:
    c = hit.chunk
    quote = c.content[ex.start - c.start : ex.end - c.start]
    return replace(cite(n, hit, (ex.start, ex.end), quote, links, (c.start, c.end), ex.best), best=ex.best)
