"""Evidence: the numbered source sentences an answer may cite.

The model is shown the sources' sentences, each with a number, and writes only those
numbers; every number resolves to one sentence with its own exact range in the
document's canonical text (``document.text[start:end] == sentence.text``), found by
the chunker's sentence regex inside the chunk's content, never by adding up lengths.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from retrieval.chunk import sentence_spans
from retrieval.types import Hit


@dataclass(frozen=True)
class SourceSentence:
    """One sentence of a source passage, numbered as the model sees it."""

    n: int  # 1-based number in the prompt
    source: int  # 1-based number of the passage (hit) it belongs to
    hit: Hit
    start: int  # absolute range in the document's canonical text
    end: int
    text: str
    vector: np.ndarray | None = None  # normalised; None when the store holds none for it


VectorsOf = Callable[[Hit], np.ndarray | None]


def number_sentences(hits: Sequence[Hit], vectors_of: VectorsOf | None = None) -> list[SourceSentence]:
    """Every sentence of every source passage, numbered 1..N in source order.

    ``vectors_of`` returns a passage's stored sentence vectors (one row per span); when
    their count does not match the spans (an index built by another sentence rule) the
    sentences get no vector and the caller embeds them.
    """
    out: list[SourceSentence] = []
    for source, hit in enumerate(hits, start=1):
        c = hit.chunk
        spans = sentence_spans(c.content)
        vecs = vectors_of(hit) if vectors_of is not None else None
        if vecs is not None and len(vecs) != len(spans):
            vecs = None
        for i, (a, b) in enumerate(spans):
            v = vecs[i] if vecs is not None else None
            out.append(SourceSentence(len(out) + 1, source, hit, c.start + a, c.start + b, c.content[a:b], v))
    return out


def most_relevant(sentences: Sequence[SourceSentence], query: np.ndarray | None, keep: int) -> list[SourceSentence]:
    """The ``keep`` sentences nearest the query, in source order and numbered again 1..keep.

    Every prompt token costs time before the first answer token (about 10 ms each on two
    cores), and the sentence that answers is almost always among the nearest few.
    Sentences without a stored vector are kept: nothing is known against them.
    """
    if query is None or len(sentences) <= keep:
        return list(sentences)
    score = {s.n: float(s.vector @ query) if s.vector is not None else np.inf for s in sentences}
    chosen = set(sorted(score, key=lambda n: -score[n])[:keep])
    kept = [s for s in sentences if s.n in chosen]
    return [replace(s, n=i) for i, s in enumerate(kept, start=1)]


def source_heading(hit: Hit) -> str:
    c = hit.chunk
    return f"{c.doc_title} — {c.section}" if c.section else c.doc_title


def sources_block(sentences: Sequence[SourceSentence]) -> str:
    """The SOURCES part of the prompt: a heading per passage, then its numbered sentences."""
    lines: list[str] = []
    current = 0
    for s in sentences:
        if s.source != current:
            if lines:
                lines.append("")
            lines.append(f"Source: {source_heading(s.hit)}")
            current = s.source
        lines.append(f"[{s.n}] {' '.join(s.text.split())}")
    return "\n".join(lines)
