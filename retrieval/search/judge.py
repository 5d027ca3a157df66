"""The judge: a cross-encoder reads the question together with each candidate sentence.

Every other signal compares two vectors (MiniLM) or two bags of words (BM25); the
judge is the one part of the pipeline that reads a question and a sentence *together*,
and so can tell a sentence that answers from one on the same topic that does not.
Footnote ships its own (``retrieval/models/reranker``, trained by
``training/train_reranker.py``); any scorer of (question, text) pairs fits.

Which sentences are judged: those of the first ``chunks`` passages of the base
ranking, nearest the question by cosine first, at most ``max_pairs``. Headings and
sentences that ask a question are never judged: they are not evidence. Scores are
cached per (question, sentence), so the evidence step reads the same verdicts the
reranker computed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from retrieval.index import Snapshot
from retrieval.ingest import chunk_sentence_spans, is_evidence, plain
from retrieval.models import load_onnx_cross_encoder
from retrieval.search.rerank import Candidate, CrossEncoderReranker, Reranker, SentenceReranker


class PairScorer(Protocol):
    """Relevance logits for (question, text) pairs (a cross-encoder)."""

    name: str

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray: ...


@dataclass(frozen=True)
class JudgeConfig:
    chunks: int = 8  # passages of the base ranking whose sentences are judged
    max_pairs: int = 40  # at most this many sentences a question (the nearest by cosine)


class Judge:
    """Probabilities that each text answers the question, cached per (question, text)."""

    def __init__(self, scorer: PairScorer, cache_size: int = 8192) -> None:
        self.scorer = scorer
        self.name = scorer.name
        self._cache: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._size = cache_size
        self._lock = threading.Lock()

    def probabilities(self, question: str, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            known = {t: self._cache.get((question, t)) for t in texts}
        todo = list(dict.fromkeys(t for t, p in known.items() if p is None))
        if todo:
            logits = self.scorer.score([(question, t) for t in todo])
            fresh = 1.0 / (1.0 + np.exp(-np.asarray(logits, dtype=np.float64)))
            with self._lock:
                for t, p in zip(todo, fresh, strict=True):
                    known[t] = float(p)
                    self._cache[(question, t)] = float(p)
                while len(self._cache) > self._size:
                    self._cache.popitem(last=False)
        return np.array([known[t] for t in texts], dtype=np.float64)


@dataclass(frozen=True)
class _Sentence:
    chunk: int  # position in the candidate list
    text: str  # as the judge reads it: without markup
    cosine: float


def _candidates(cands: Sequence[Candidate], snap: Snapshot, qvec: np.ndarray | None) -> list[_Sentence]:
    out = []
    for pos, c in enumerate(cands):
        chunk = snap.chunks[c.index]
        spans = chunk_sentence_spans(chunk)
        rows = snap.sentence_rows(c.index)
        cos = rows @ qvec if qvec is not None and len(rows) == len(spans) else np.zeros(len(spans))
        for (a, b), s in zip(spans, cos, strict=True):
            text = chunk.content[a:b]
            if is_evidence(text):
                out.append(_Sentence(pos, plain(text), float(s)))
    return out


@dataclass
class JudgedReranker:
    """The base reranker's order, then its first ``chunks`` passages reordered by their best
    sentence's verdict (``signals["judge"]``, a probability); the rest keep their order."""

    judge: Judge
    base: Reranker | None = None
    cfg: JudgeConfig = JudgeConfig()

    def rerank(
        self, query: str, qvec: np.ndarray, cands: list[Candidate], snap: Snapshot, sentence: np.ndarray | None = None
    ) -> list[Candidate]:
        ranked = self.base.rerank(query, qvec, cands, snap, sentence) if self.base is not None else cands
        top, rest = ranked[: self.cfg.chunks], ranked[self.cfg.chunks :]
        pool = sorted(_candidates(top, snap, qvec), key=lambda s: -s.cosine)[: self.cfg.max_pairs]
        best = np.full(len(top), -1.0)
        if pool:
            probs = self.judge.probabilities(query, [s.text for s in pool])
            for s, p in zip(pool, probs, strict=True):
                best[s.chunk] = max(best[s.chunk], p)
        judged = [Candidate(c.index, c.score, {**c.signals, "judge": float(best[i])}) for i, c in enumerate(top)]
        # Stable: passages the judge scores alike keep the base order.
        order = sorted(range(len(judged)), key=lambda i: -best[i])
        return [judged[i] for i in order] + rest


FOOTNOTE = "footnote"  # FOOTNOTE_RERANKER's name for Footnote's own cross-encoder


def load_reranker(name: str | None, sentence_weight: float, section_weight: float = 1.5) -> Reranker | None:
    """``None``/``"sentence"`` = the built-in sentence reranker, ``"footnote"`` = it judged by
    Footnote's own cross-encoder, ``"none"`` = off, else a team's own CrossEncoder directory."""
    if name in (None, "", "sentence"):
        return SentenceReranker(sentence_weight, section_weight)
    if name == "none":
        return None
    if name == FOOTNOTE:
        return JudgedReranker(Judge(load_onnx_cross_encoder()), SentenceReranker(sentence_weight, section_weight))
    return CrossEncoderReranker(name)
