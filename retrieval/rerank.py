"""Rerankers: reorder the fused shortlist.

``SentenceReranker`` (the offline default) adds the best-sentence cosine, a
late interaction whose vectors were computed at index time, so it costs a
matrix-vector product. ``CrossEncoderReranker`` runs a sentence-transformers
CrossEncoder (e.g. ms-marco-MiniLM-L-6-v2) for teams that have one locally.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from retrieval.embed import load_cross_encoder

if TYPE_CHECKING:
    from retrieval.search import Snapshot


@dataclass
class Candidate:
    index: int  # position in the snapshot's chunk list
    score: float
    signals: dict[str, float] = field(default_factory=dict)


class Reranker(Protocol):
    def rerank(self, query: str, qvec: np.ndarray, cands: list[Candidate], snap: Snapshot) -> list[Candidate]: ...


@dataclass(frozen=True)
class SentenceReranker:
    """score += weight x (cosine of the chunk's sentence nearest to the query)."""

    weight: float = 1.5

    def rerank(self, query: str, qvec: np.ndarray, cands: list[Candidate], snap: Snapshot) -> list[Candidate]:
        best = snap.best_sentence(qvec)
        out = []
        for c in cands:
            s = float(best[c.index])
            out.append(Candidate(c.index, c.score + self.weight * s, {**c.signals, "sentence": s}))
        return sorted(out, key=lambda c: -c.score)


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder over (query, chunk text) pairs."""

    def __init__(self, model: str) -> None:
        self._model: Any = load_cross_encoder(model)

    def rerank(self, query: str, qvec: np.ndarray, cands: list[Candidate], snap: Snapshot) -> list[Candidate]:
        if not cands:
            return cands
        scores = self._model.predict([(query, snap.chunks[c.index].text) for c in cands], show_progress_bar=False)
        out = [
            Candidate(c.index, float(s), {**c.signals, "cross_encoder": float(s)})
            for c, s in zip(cands, scores, strict=True)
        ]
        return sorted(out, key=lambda c: -c.score)


def load_reranker(name: str | None, sentence_weight: float) -> Reranker | None:
    """``None``/``"sentence"`` = the built-in default, ``"none"`` = off, else a CrossEncoder."""
    if name in (None, "", "sentence"):
        return SentenceReranker(sentence_weight)
    if name == "none":
        return None
    return CrossEncoderReranker(name)
