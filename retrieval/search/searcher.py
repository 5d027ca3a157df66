"""Hybrid search: dense + BM25 candidates, fused, then reranked.

Dense candidates are an exact cosine scan of the snapshot's vectors (never the
store's approximate HNSW index), so a question ranks the same whether or not a
sync is rewriting the store.

The default ranking, chosen by measurement on the dev set, is a weighted score
fusion ``cosine + w_bm25 * bm25 / best_bm25`` reranked by adding
``w_sentence * best-sentence cosine`` (each candidate's sentences were embedded at
index time: a cheap late interaction). Reciprocal rank fusion (k = 60) and single
retrievers remain available as strategies for comparison and evaluation.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from retrieval.errors import StoreError
from retrieval.index import Snapshot
from retrieval.models import Embedder
from retrieval.search.languages import Languages
from retrieval.search.rerank import Candidate, Reranker
from retrieval.types import Chunk, Hit

FUSIONS = ("weighted", "rrf", "dense", "bm25")
K = TypeVar("K", bound=Hashable)

# What builds an emoji besides its symbol: the joiner, the emoji presentation selector, the
# keycap and the skin tones.
_EMOJI_PARTS = frozenset({"\u200d", "\ufe0f", "\u20e3", *map(chr, range(0x1F3FB, 0x1F400))})


def without_pictographs(text: str) -> str:
    """A message as it is embedded for search: emoji and other pictographs (Unicode's "So")
    left out. No document holds them as words (BM25 never sees them), yet the embedding
    model reads them into a chatty message's vector: on danish-dev, whose chatty messages
    carry one in 12 of 32, leaving them out moved chatty R@4 0.625 -> 0.656 and direct
    questions not at all. A text without any is returned as it is; one of nothing else too."""
    kept = "".join(" " if unicodedata.category(ch) == "So" or ch in _EMOJI_PARTS else ch for ch in text)
    if kept == text:
        return text
    return " ".join(kept.split()) or text


@dataclass(frozen=True)
class SearchConfig:
    fusion: str = "weighted"
    weight_bm25: float = 0.5
    candidates: int = 50  # taken from each retriever
    rrf_k: int = 60
    shortlist: int = 100  # fused candidates handed to the reranker (measured: 25 lost R@20 0.94 -> 0.88)
    # Scan the sentence vectors for the gate's nearest sentence even without a sentence
    # reranker (which scans them anyway). Calibration probes that will not read it skip the scan.
    nearest_sentence: bool = True


@dataclass(frozen=True)
class SearchResult:
    query: str
    hits: list[Hit]
    best_distance: float  # nearest chunk by cosine distance, whatever its rank
    coverage: float
    timings: dict[str, float]
    query_vector: np.ndarray | None = None  # the embedded query (with its thread context)
    # Nearest single sentence by cosine distance, whatever its chunk's rank; None when the
    # index holds no sentence vectors (the gate then reads the chunk distance twice).
    best_sentence_distance: float | None = None
    language: str | None = None  # the question's language (None: too short to tell)


def reciprocal_rank(rankings: Iterable[Sequence[K]], k: int = 60) -> dict[K, float]:
    """Reciprocal-rank fusion: each item's sum of 1 / (k + rank) over the rankings, in first-seen order."""
    scores: dict[K, float] = {}
    for ranking in rankings:
        for r, item in enumerate(ranking):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + r + 1)
    return scores


class Searcher:
    """Ranks one snapshot's chunks for questions; holds no mutable state, so threads may share it."""

    def __init__(
        self,
        snapshot: Snapshot,
        embedder: Embedder,
        cfg: SearchConfig,
        reranker: Reranker | None = None,
        languages: Languages | None = None,
    ) -> None:
        if snapshot.embedding_model != embedder.name:
            raise StoreError(
                f"the index was built with {snapshot.embedding_model} but the query model is {embedder.name}; "
                "vectors of two models cannot be compared: run `footnote index` to rebuild"
            )
        self.snapshot = snapshot
        self.embedder = embedder
        self.cfg = cfg
        self.reranker = reranker
        self.languages = languages or Languages()

    def message_vector(self, text: str) -> np.ndarray:
        """A message's vector as search embeds it: without its pictographs."""
        return self.embedder.embed_queries([without_pictographs(text)])[0]

    def search(
        self,
        query: str,
        k: int = 20,
        context: Sequence[str] = (),
        folders: Sequence[str] | None = None,
        glosses: str = "",
    ) -> SearchResult:
        """Rank chunks for ``query``; ``context`` (earlier questions in a thread) widens the query.

        ``folders`` (path prefixes) restricts the search to documents under them: a
        channel sees only its collection. Chunks outside are never candidates.
        ``glosses`` (words of the drive's language a question in another language translates
        to, ``retrieval.search.glossary``) are searched with the query and count in the gate's
        vocabulary coverage: the small model's translation leaves words the drive never uses,
        which made answerable questions look off-topic. Measured on danish-dev asked in English,
        coverage of the query alone refused 10 of 64 answerable questions against 1, and 20 of
        60 unanswerable ones against 3 (pointed at instead), none answered either way
        (docs/measurements.md, "Words looked up").
        """
        snap = self.snapshot
        timings: dict[str, float] = {}
        t = time.perf_counter()
        full = " ".join([*context, query, *([glosses] if glosses else [])])
        q = self.message_vector(full)
        timings["embed"] = _lap(t)
        # Glosses are the drive's words: with them a translation that kept some of the asker's
        # words is still read as the drive's language (its stems and compounds, for Danish).
        lang = self.languages.question(f"{query} {glosses}" if glosses else query, snap)
        allowed = snap.within(folders)
        if not snap.chunks or (allowed is not None and not allowed.any()):
            return SearchResult(query, [], 1.0, snap.bm25.coverage(full, lang), timings, q, language=lang)

        t = time.perf_counter()
        cos = snap.vectors @ q
        dense_ids = self._dense(cos, allowed)
        timings["dense"] = _lap(t)

        t = time.perf_counter()
        bm = snap.bm25.scores(full, lang)
        if allowed is not None:
            bm = np.where(allowed, bm, 0.0)
        top_bm = np.argsort(-bm)[: self.cfg.candidates]
        top_bm = top_bm[bm[top_bm] > 0]
        timings["bm25"] = _lap(t)

        t = time.perf_counter()
        cands = self._fuse(dense_ids, top_bm, cos, bm)
        if allowed is not None:
            cands = [c for c in cands if allowed[c.index]]
        cands = distinct(cands, snap.chunks)
        timings["fuse"] = _lap(t)

        t = time.perf_counter()
        wanted = self.reranker is not None or self.cfg.nearest_sentence
        sentence = snap.best_sentence(q) if wanted else None  # read by the gate and by the sentence reranker
        if self.reranker is not None:
            shortlist = cands[: self.cfg.shortlist]
            cands = self.reranker.rerank(full, q, shortlist, snap, sentence) + cands[self.cfg.shortlist :]
        timings["rerank"] = _lap(t)

        hits = [Hit(snap.chunks[c.index], c.score, float(1.0 - cos[c.index]), c.signals) for c in cands[:k]]
        best_distance = float(1.0 - (cos.max() if allowed is None else cos[allowed].max()))
        sentence_distance = None if sentence is None else snap.nearest_sentence_distance(sentence, allowed)
        coverage = snap.bm25.coverage(full, lang)
        return SearchResult(query, hits, best_distance, coverage, timings, q, sentence_distance, lang)

    def _dense(self, cos: np.ndarray, allowed: np.ndarray | None) -> list[int]:
        """Dense candidates by exact scan: the top cosines, among the allowed chunks only."""
        n = self.cfg.candidates
        if allowed is None:
            return [int(i) for i in np.argsort(-cos)[:n]]
        pool = np.flatnonzero(allowed)
        return [int(i) for i in pool[np.argsort(-cos[pool])[:n]]]

    def _fuse(self, dense: list[int], bm_top: np.ndarray, cos: np.ndarray, bm: np.ndarray) -> list[Candidate]:
        fusion = self.cfg.fusion
        if fusion == "dense":
            order = dense
            scores = {i: float(cos[i]) for i in order}
        elif fusion == "bm25":
            order = [int(i) for i in bm_top]
            scores = {i: float(bm[i]) for i in order}
        elif fusion == "rrf":
            scores = reciprocal_rank((dense, [int(i) for i in bm_top]), self.cfg.rrf_k)
            order = sorted(scores, key=lambda i: -scores[i])
        elif fusion == "weighted":
            best_bm = float(bm.max()) if len(bm) and bm.max() > 0 else 1.0
            pool = set(dense) | {int(i) for i in bm_top}
            scores = {i: float(cos[i]) + self.cfg.weight_bm25 * float(bm[i]) / best_bm for i in pool}
            order = sorted(scores, key=lambda i: -scores[i])
        else:
            raise ValueError(f"unknown fusion {fusion!r}; choose one of {', '.join(FUSIONS)}")
        return [
            Candidate(i, scores[i], {"cosine": float(cos[i]), "bm25": float(bm[i]), "fused": scores[i]}) for i in order
        ]


def distinct(cands: list[Candidate], chunks: Sequence[Chunk]) -> list[Candidate]:
    """One candidate per passage text, at the place of the first. A document copied within
    the drive ("On-call (1).md", "Copy of Handbook.docx") would show each passage twice and
    push another passage out of the three shown; of equal scores the plainest path (the
    shortest, then the first by name) stands for the copies, else the best-scored one."""
    groups: dict[str, list[Candidate]] = {}
    for c in cands:
        groups.setdefault(chunks[c.index].content, []).append(c)

    def plainest(m: Candidate) -> tuple[float, int, str]:
        path = chunks[m.index].path
        return (-m.score, len(path), path)

    return [min(members, key=plainest) for c in cands if (members := groups[chunks[c.index].content])[0] is c]


def _lap(t: float) -> float:
    return (time.perf_counter() - t) * 1000.0
