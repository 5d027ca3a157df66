"""The searchable view of an index: chunks, vectors, sentence vectors and BM25, frozen.

A sync builds a new snapshot and the searcher swaps it in whole, so a question never
sees a half-written index.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from retrieval.index.bm25 import Bm25Index
from retrieval.index.store import StoredIndex
from retrieval.types import Chunk, Hit


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
    languages: dict[str, str] = field(default_factory=dict, compare=False)  # document -> its language
    passages_in: dict[str, int] = field(init=False, repr=False, compare=False)  # language -> its passages
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
        counts: dict[str, int] = {}
        for c in self.chunks:
            lang = self.languages.get(c.path)
            if lang is not None:
                counts[lang] = counts.get(lang, 0) + 1
        set_(self, "passages_in", counts)
        set_(self, "_masks", {})
        set_(self, "_masks_lock", threading.Lock())

    @classmethod
    def build(
        cls,
        stored: StoredIndex,
        embedding_model: str,
        keep: Callable[[str], bool] | None = None,
        languages: Mapping[str, str] | None = None,
    ) -> Snapshot:
        """From what the store holds; ``keep`` drops documents not to be searched (stale, other model);
        ``languages`` gives each document's language (BM25 reads a Danish one as Danish)."""
        idx = np.asarray([i for i, c in enumerate(stored.chunks) if keep is None or keep(c.path)], dtype=np.int64)
        remap = np.full(len(stored.chunks), -1, dtype=np.int64)
        remap[idx] = np.arange(len(idx))
        owner = remap[stored.sentence_owner]
        mask = owner >= 0
        chunks = [stored.chunks[i] for i in idx]
        langs = dict(languages or {})
        bm25 = Bm25Index([c.text for c in chunks], languages=[langs.get(c.path, "en") for c in chunks])
        mine = {p: langs[p] for p in {c.path for c in chunks} if p in langs}
        vectors, sentences = stored.vectors[idx], stored.sentence_vectors[mask]
        return cls(chunks, vectors, sentences, owner[mask], bm25, embedding_model, languages=mine)

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
