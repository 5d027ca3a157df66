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

import threading
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from retrieval.bm25 import Bm25Index
from retrieval.embed import Embedder
from retrieval.errors import StoreError
from retrieval.rerank import Candidate, Reranker
from retrieval.store import StoredIndex
from retrieval.types import Chunk, Hit

FUSIONS = ("weighted", "rrf", "dense", "bm25")
K = TypeVar("K", bound=Hashable)


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


@dataclass(frozen=True, eq=False)  # compared by identity: one per sync
class Snapshot:
    """An immutable, consistent view of the index that queries run against.

    A sync builds a new snapshot and swaps it in whole, so a query never sees a
    half-written index. The only state added after construction is the cache of
    folder masks (pure functions of the chunks), filled under a lock.
    """

    chunks: list[Chunk]
    vectors: np.ndarray
    sentence_vectors: np.ndarray
    sentence_owner: np.ndarray
    bm25: Bm25Index
    embedding_model: str
    by_id: dict[str, int] = field(init=False, repr=False, compare=False)
    section_of: np.ndarray = field(init=False, repr=False, compare=False)  # chunk -> its (document, section) group
    has_sentences: np.ndarray = field(init=False, repr=False, compare=False)  # chunk -> holds sentence vectors
    n_sections: int = field(init=False, repr=False, compare=False)
    _masks: dict[tuple[str, ...], np.ndarray] = field(init=False, repr=False, compare=False)
    _masks_lock: threading.Lock = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        groups: dict[tuple[str, str], int] = {}
        section_of = np.fromiter(
            (groups.setdefault((c.path, c.section), len(groups)) for c in self.chunks), np.int64, len(self.chunks)
        )
        has_sentences = np.zeros(len(self.chunks), dtype=bool)
        has_sentences[self.sentence_owner] = True
        for array in (self.vectors, self.sentence_vectors, self.sentence_owner, section_of, has_sentences):
            array.flags.writeable = False  # shared by every question: nobody may write into it
        set_ = object.__setattr__  # frozen: fields derived here are set once, before anyone sees the snapshot
        set_(self, "by_id", {c.id: i for i, c in enumerate(self.chunks)})
        set_(self, "section_of", section_of)
        set_(self, "has_sentences", has_sentences)
        set_(self, "n_sections", len(groups))
        set_(self, "_masks", {})
        set_(self, "_masks_lock", threading.Lock())

    @classmethod
    def build(cls, stored: StoredIndex, embedding_model: str, keep: Callable[[str], bool] | None = None) -> Snapshot:
        """From what the store holds; ``keep`` drops documents not to be searched (stale, other model)."""
        idx = np.asarray([i for i, c in enumerate(stored.chunks) if keep is None or keep(c.path)], dtype=np.int64)
        remap = np.full(len(stored.chunks), -1, dtype=np.int64)
        remap[idx] = np.arange(len(idx))
        owner = remap[stored.sentence_owner]
        mask = owner >= 0
        chunks = [stored.chunks[i] for i in idx]
        bm25 = Bm25Index([c.text for c in chunks])
        return cls(chunks, stored.vectors[idx], stored.sentence_vectors[mask], owner[mask], bm25, embedding_model)

    def within(self, folders: Sequence[str] | None) -> np.ndarray | None:
        """A mask of the chunks under any of ``folders`` (None = no restriction)."""
        if folders is None:
            return None
        key = tuple(sorted(folders))
        with self._masks_lock:
            mask = self._masks.get(key)
            if mask is None:
                prefixes = tuple(f.strip("/") + "/" for f in key if f.strip("/"))
                everything = any(not f.strip("/") for f in key)
                mask = np.fromiter(
                    (everything or c.path.startswith(prefixes) for c in self.chunks), bool, len(self.chunks)
                )
                mask.flags.writeable = False
                self._masks[key] = mask
        return mask

    def section_max(self, per_chunk: np.ndarray) -> np.ndarray:
        """For each chunk, the maximum of ``per_chunk`` over all chunks of its section."""
        top = np.full(self.n_sections, -np.inf, dtype=np.float32)
        if len(per_chunk):
            np.maximum.at(top, self.section_of, per_chunk)
        return top[self.section_of]

    def sentence_rows(self, i: int) -> np.ndarray:
        """The stored vectors of chunk ``i``'s sentences, in the order of its sentence spans."""
        lo, hi = np.searchsorted(self.sentence_owner, [i, i + 1])
        return self.sentence_vectors[lo:hi]

    def sentence_rows_of(self, hit: Hit) -> np.ndarray | None:
        """The stored sentence vectors of a hit's chunk, or None when this snapshot lacks it."""
        i = self.by_id.get(hit.chunk.id)
        return None if i is None else self.sentence_rows(i)

    def best_sentence(self, q: np.ndarray) -> np.ndarray:
        """Per chunk, the cosine of its sentence closest to the query (-1 for a chunk without any)."""
        best = np.full(len(self.chunks), -1.0, dtype=np.float32)
        if len(self.sentence_owner):
            np.maximum.at(best, self.sentence_owner, self.sentence_vectors @ q)
        return best

    def nearest_sentence_distance(self, per_chunk: np.ndarray, allowed: np.ndarray | None) -> float | None:
        """1 - the best of ``best_sentence``'s cosines over the allowed chunks that hold sentences;
        None when none does (an index without sentence vectors, or a folder of such chunks)."""
        usable = self.has_sentences if allowed is None else self.has_sentences & allowed
        return float(1.0 - per_chunk[usable].max()) if usable.any() else None


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

    def search(
        self, query: str, k: int = 20, context: Sequence[str] = (), folders: Sequence[str] | None = None
    ) -> SearchResult:
        """Rank chunks for ``query``; ``context`` (earlier questions in a thread) widens the query.

        ``folders`` (path prefixes) restricts the search to documents under them: a
        channel sees only its collection. Chunks outside are never candidates.
        """
        snap = self.snapshot
        timings: dict[str, float] = {}
        t = time.perf_counter()
        full = " ".join([*context, query])
        q = self.embedder.embed([full])[0]
        timings["embed"] = _lap(t)
        allowed = snap.within(folders)
        if not snap.chunks or (allowed is not None and not allowed.any()):
            return SearchResult(query, [], 1.0, snap.bm25.coverage(full), timings, q)

        t = time.perf_counter()
        cos = snap.vectors @ q
        dense_ids = self._dense(cos, allowed)
        timings["dense"] = _lap(t)

        t = time.perf_counter()
        bm = snap.bm25.scores(full)
        if allowed is not None:
            bm = np.where(allowed, bm, 0.0)
        top_bm = np.argsort(-bm)[: self.cfg.candidates]
        top_bm = top_bm[bm[top_bm] > 0]
        timings["bm25"] = _lap(t)

        t = time.perf_counter()
        cands = self._fuse(dense_ids, top_bm, cos, bm)
        if allowed is not None:
            cands = [c for c in cands if allowed[c.index]]
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
        return SearchResult(query, hits, best_distance, snap.bm25.coverage(full), timings, q, sentence_distance)

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


def _lap(t: float) -> float:
    return (time.perf_counter() - t) * 1000.0
