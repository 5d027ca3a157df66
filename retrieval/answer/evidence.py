"""Evidence: the numbered source sentences an answer may cite.

The model is shown the sources' sentences, each with a number, and writes only those
numbers; every number resolves to one sentence with its own exact range in the
document's canonical text (``document.text[start:end] == sentence.text``), found by
the chunker's sentence regex inside the chunk's content, never by adding up lengths.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from retrieval.index import Snapshot, tokenize
from retrieval.ingest import chunk_sentence_spans, is_heading, is_planted, is_question, plain
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
        spans = chunk_sentence_spans(c)
        vecs = vectors_of(hit) if vectors_of is not None else None
        if vecs is not None and len(vecs) != len(spans):
            vecs = None
        for i, (a, b) in enumerate(spans):
            v = vecs[i] if vecs is not None else None
            out.append(SourceSentence(len(out) + 1, source, hit, c.start + a, c.start + b, c.content[a:b], v))
    return out


# What makes a source sentence the one that answers, as weights on
# :func:`sentence_features`, in units of query cosine. Fitted by
# ``python -m bench.sentence_ranker`` (a listwise logistic model on the dev set: for
# each question, which of the gate's source sentences holds the verbatim answer),
# validated by splitting the documents into halves, fitting on one and ranking the
# other: the answering sentence came first 33 times in 52 against 26 for the previous
# cosine + 0.5 idf-share rule; among the first four 45 times in both.
FEATURES = ("cosine", "idf_share", "passage_rank", "log_words", "ends_with_colon", "prose")
RELEVANCE_WEIGHTS = (1.0, 1.18, -0.18, 0.53, -0.49, 0.46)


def sentence_features(s: SourceSentence, query: np.ndarray | None, question_idf: dict[str, float]) -> list[float]:
    """A sentence's cosine to the query, the share of the question's idf mass it holds
    (rare words matter), its passage's rank, its length, whether it only introduces
    what follows (ends in a colon), and the share of its words that are words (not code)."""
    cos = float(s.vector @ query) if s.vector is not None and query is not None else 0.0
    total = sum(question_idf.values())
    words = set(tokenize(s.text))
    covered = sum(w_idf for w, w_idf in question_idf.items() if w in words) / total if total else 0.0
    tokens = s.text.split()
    prose = sum(t.isalpha() for t in tokens) / len(tokens) if tokens else 0.0
    colon = float(s.text.rstrip().endswith(":"))
    return [cos, covered, float(s.source - 1), math.log1p(len(tokens)), colon, prose]


def relevance(s: SourceSentence, query: np.ndarray | None, question_idf: dict[str, float]) -> float:
    """How likely the sentence is the one that answers the question (see RELEVANCE_WEIGHTS)."""
    return sum(w * f for w, f in zip(RELEVANCE_WEIGHTS, sentence_features(s, query, question_idf), strict=True))


# Interrogatives, English and Danish: they ask, and say nothing of the answer.
QUESTION_WORDS = frozenset(
    [
        "what",
        "who",
        "whom",
        "whose",
        "which",
        "where",
        "when",
        "why",
        "how",
        "hvad",
        "hvem",
        "hvor",
        "hvordan",
        "hvorfor",
        "hvorledes",
        "hvornår",
        "hvilken",
        "hvilket",
        "hvilke",
    ]
)


def question_weights(question: str, idf: dict[str, float]) -> dict[str, float]:
    """The question's words (longer than two letters, no interrogative) with their corpus idf.
    An interrogative says nothing about which sentence answers: documentation rarely writes
    "hvad", so its idf is high, and on danish-dev "Hvad er SAF-T?" ranked first the navigation
    sentence quoting Business Central's "Fortæl mig, hvad du vil foretage dig", above the
    definition. Other function words stay: "ikke", "hvis" and "efter" tell answers apart
    (dropping every stopword lost two Danish answers for the two it won)."""
    return {w: idf.get(w, 0.0) for w in set(tokenize(question)) if len(w) > 2 and w not in QUESTION_WORDS}


def most_relevant(
    sentences: Sequence[SourceSentence],
    query: np.ndarray | None,
    keep: int,
    question_idf: dict[str, float] | None = None,
) -> list[SourceSentence]:
    """The ``keep`` most relevant sentences, most relevant first, numbered again 1..keep;
    none of them planted (empty when every sentence is).

    A small model leans on the first lines it reads; the first is the likeliest answer.

    Every prompt token costs time before the first answer token (about 10 ms each on two
    cores), and the sentence that answers is almost always among the first few.
    """
    idf = question_idf or {}
    # An instruction planted in a document for an assistant is an order, not a fact: it is
    # never shown to the model nor quoted, even when nothing else is left.
    usable = [s for s in sentences if not is_planted(s.hit.chunk, s.start, s.end)]
    # A heading says what a section is about, never what it says: quoted back as an
    # answer's evidence ("The docs say: «# Chat completion»") it backs nothing. Nor does
    # a question the source asks (an exercise, a rhetorical or FAQ question): it answers nothing.
    pool = [s for s in usable if not is_heading(s.text) and not is_question(s.text)] or usable
    ranked = sorted(pool, key=lambda s: -relevance(s, query, idf))
    return [replace(s, n=i) for i, s in enumerate(ranked[:keep], start=1)]


def sentences_read(
    hits: Sequence[Hit], snapshot: Snapshot, query: np.ndarray | None, question: str, keep: int | None = None
) -> list[SourceSentence]:
    """The source sentences of ``hits`` the model reads for ``question``, most relevant first:
    the first ``keep`` (all, ranked, when None) by :func:`most_relevant`, with the drive's idf."""
    sentences = number_sentences(hits, snapshot.sentence_rows_of)
    idf = question_weights(question, snapshot.bm25.idf)
    return most_relevant(sentences, query, len(sentences) if keep is None else keep, idf)


def source_heading(hit: Hit) -> str:
    c = hit.chunk
    return f"{c.doc_title} — {c.section}" if c.section else c.doc_title


class Numbered(Protocol):
    """What the prompt shows of a sentence: its number and its words."""

    @property
    def n(self) -> int: ...

    @property
    def text(self) -> str: ...


def sources_block(sentences: Sequence[Numbered]) -> str:
    """The SOURCES part of the prompt: the numbered sentences, one per line, no headings.

    Measured on the dev set (4 sentences, the 0.5B model): with each passage's
    "Source: title — section" line the prompt had 181 tokens p50 and the model cited the
    answering sentence 34 times in 59; without, 150 tokens, 0.35 s sooner, and 36 times.
    The headings still count for the support check and are shown with every citation.
    The model reads a sentence's words without their markup (:func:`retrieval.ingest.markup.plain`):
    a link's URL or a template tag is prompt tokens, and words it would copy into the
    answer, that say nothing.
    """
    # Composed letters (NFC): a Mac's "a" + combining ring reads to the model as the "å" it writes.
    return "\n".join(f"[{s.n}] {unicodedata.normalize('NFC', plain(s.text))}" for s in sentences)
