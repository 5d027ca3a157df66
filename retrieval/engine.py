"""Wiring: opens the store and manifest under a data dir and builds the pipeline.

Takes plain arguments (the edges translate settings into them) and owns the
current :class:`Snapshot`, swapped atomically after each sync.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from retrieval.chunk import ChunkerConfig
from retrieval.embed import Embedder
from retrieval.indexer import Indexer, SyncReport
from retrieval.manifest import INDEXED, Manifest
from retrieval.rerank import Reranker
from retrieval.search import SearchConfig, Searcher, Snapshot
from retrieval.store import ChromaStore


@dataclass(frozen=True)
class EngineConfig:
    data_dir: Path
    docs_dir: Path
    chunker: ChunkerConfig
    search: SearchConfig
    max_file_bytes: int = 50_000_000
    chroma_url: str | None = None


class Engine:
    """The index and its searcher, for one docs folder."""

    def __init__(self, cfg: EngineConfig, embedder: Embedder, reranker: Reranker | None) -> None:
        self.cfg = cfg
        self.embedder = embedder
        self.reranker = reranker
        self.manifest = Manifest(cfg.data_dir / "manifest.sqlite3")
        self.store = ChromaStore(cfg.data_dir / "chroma", url=cfg.chroma_url)
        self.indexer = Indexer(cfg.docs_dir, self.store, self.manifest, embedder, cfg.chunker, cfg.max_file_bytes)
        self._sync_lock = threading.Lock()
        self._searcher: Searcher | None = None

    def sync(self, *, progress: bool = False) -> SyncReport:
        """Bring the index up to date with the folder, then swap in a fresh snapshot."""
        with self._sync_lock:
            report = self.indexer.sync(progress=progress)
            self._searcher = None
            return report

    def searcher(self) -> Searcher:
        s = self._searcher
        if s is None:
            s = Searcher(self._snapshot(), self.embedder, self.cfg.search, self.reranker, self.store)
            self._searcher = s
        return s

    def _snapshot(self) -> Snapshot:
        """Only documents indexed with the current embedding model are searchable."""
        recs = self.manifest.all()
        ok = {
            p
            for p, r in recs.items()
            if r.state == INDEXED
            and r.stamps is not None
            and r.stamps.embedding_model == self.embedder.name
            and r.stamps.dimension == self.embedder.dimension
        }
        return Snapshot.build(self.store.load(), self.embedder.name, keep=ok.__contains__)
