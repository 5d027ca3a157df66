"""Wiring: opens the store and manifest under a data dir and builds the pipeline.

Takes plain arguments (the edges translate settings into them) and owns the
current :class:`Snapshot`, swapped atomically after each sync.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from retrieval.chunk import ChunkerConfig
from retrieval.embed import Embedder
from retrieval.indexer import Indexer, SyncReport
from retrieval.manifest import INDEXED, STALE, Manifest
from retrieval.rerank import Reranker
from retrieval.sandbox import ExtractionRunner
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
    ignore: tuple[str, ...] = ()
    extract_timeout_s: float = 60.0


@dataclass(frozen=True)
class LastSync:
    finished_at: float
    seconds: float
    report: SyncReport | None
    error: str | None = None


class Engine:
    """The index and its searcher, for one docs folder."""

    def __init__(self, cfg: EngineConfig, embedder: Embedder, reranker: Reranker | None) -> None:
        self.cfg = cfg
        self.embedder = embedder
        self.reranker = reranker
        self.manifest = Manifest(cfg.data_dir / "manifest.sqlite3")
        self.store = ChromaStore(cfg.data_dir / "chroma", url=cfg.chroma_url)
        self.indexer = Indexer(
            cfg.docs_dir,
            self.store,
            self.manifest,
            embedder,
            cfg.chunker,
            cfg.max_file_bytes,
            cfg.ignore,
            ExtractionRunner(cfg.extract_timeout_s),
        )
        self._sync_lock = threading.Lock()
        self._searcher: Searcher | None = None
        self.last_sync: LastSync | None = None

    def sync(self, *, progress: bool = False, only: Collection[str] | None = None) -> SyncReport:
        """Bring the index up to date with the folder; questions meanwhile see the last snapshot.

        While the store changes underneath, the current searcher answers from its own
        in-memory snapshot (exact scan, no store queries); the new snapshot is built
        and swapped in whole when the sync ends. Two syncs never overlap.
        """
        with self._sync_lock:
            before = self._searcher
            if before is not None:
                self._searcher = before.detached()
            t0 = time.time()
            try:
                report = self.indexer.sync(progress=progress, only=only)
            except Exception as exc:
                self._searcher = before
                self.last_sync = LastSync(time.time(), time.time() - t0, None, str(exc))
                raise
            self._searcher = self._build() if before is not None else None
            self.last_sync = LastSync(time.time(), report.seconds, report)
            return report

    def searcher(self) -> Searcher:
        s = self._searcher
        if s is None:
            s = self._build()
            self._searcher = s
        return s

    def mark_stale(self) -> list[str]:
        """Record documents whose stamps no longer match the configured pipeline."""
        with self._sync_lock:
            return self.indexer.mark_stale()

    def _build(self) -> Searcher:
        return Searcher(self._snapshot(), self.embedder, self.cfg.search, self.reranker, self.store)

    def _snapshot(self) -> Snapshot:
        """Searchable: indexed (or stale but complete) documents whose vectors are of the current model.

        Vectors of two models are never compared; a document being rewritten, or whose
        stored chunks do not match its record, is left out until it is rebuilt.
        """
        stored = self.store.load()
        counts = Counter(c.path for c in stored.chunks)
        ok = {
            p
            for p, r in self.manifest.all().items()
            if r.state in (INDEXED, STALE)
            and r.chunks > 0
            and counts.get(p, 0) == r.chunks
            and r.stamps is not None
            and r.stamps.embedding_model == self.embedder.name
            and r.stamps.dimension == self.embedder.dimension
        }
        return Snapshot.build(stored, self.embedder.name, keep=ok.__contains__)
