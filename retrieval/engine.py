"""Wiring: opens the store and manifest under a data dir and builds the pipeline.

Takes plain arguments (the edges translate settings into them) and owns the
current :class:`Snapshot`, swapped atomically after each sync.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from retrieval.chunk import ChunkerConfig
from retrieval.embed import Embedder
from retrieval.errors import SyncBusy
from retrieval.indexer import Indexer, SyncReport
from retrieval.manifest import INDEXED, STALE, Manifest, SqliteManifest
from retrieval.rerank import Reranker
from retrieval.sandbox import ExtractionRunner
from retrieval.search import SearchConfig, Searcher, Snapshot
from retrieval.store import ChromaLease, ChromaManifest, ChromaStore


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
    ocr: bool = False  # read image-only PDF pages with tesseract
    refresh_s: float = 5.0  # how often a replica checks whether another one changed the index


def release_memory() -> None:
    """Hand freed heap back to the OS after a sync that embedded text.

    Embedding leaves ~100 MB of freed-but-kept malloc arenas (measured on the dev
    set); glibc's ``malloc_trim`` returns them. Elsewhere it is a no-op.
    """
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class FileLease:
    """The sync lease on one machine: an exclusive ``flock`` on a file in the data dir.

    It keeps `footnote index` and a running `footnote serve` from syncing at the same
    time; the kernel drops it if the holder dies. A generation file tells the other
    process that the index changed.
    """

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self._path = data_dir / "sync.lock"
        self._gen = data_dir / "generation"
        self._fd: int | None = None

    def acquire(self) -> bool:
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def generation(self) -> int:
        try:
            return int(self._gen.read_text() or 0)
        except (OSError, ValueError):
            return 0

    def bump(self) -> int:
        n = self.generation() + 1
        tmp = self._gen.with_suffix(".tmp")
        tmp.write_text(str(n))
        tmp.replace(self._gen)
        return n


class Lease(Protocol):
    def acquire(self) -> bool: ...

    def release(self) -> None: ...

    def generation(self) -> int: ...

    def bump(self) -> int: ...


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
        self.store = ChromaStore(cfg.data_dir / "chroma", url=cfg.chroma_url)
        self.manifest: Manifest
        self.lease: Lease
        if self.store.shared:  # replicas share the records and the lease through the server
            self.manifest = ChromaManifest(self.store)
            self.lease = ChromaLease(self.store, f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}")
        else:
            self.manifest = SqliteManifest(cfg.data_dir / "manifest.sqlite3")
            self.lease = FileLease(cfg.data_dir)
        self.indexer = Indexer(
            cfg.docs_dir,
            self.store,
            self.manifest,
            embedder,
            cfg.chunker,
            cfg.max_file_bytes,
            cfg.ignore,
            ExtractionRunner(cfg.extract_timeout_s),
            cfg.ocr,
        )
        self._sync_lock = threading.Lock()
        self._searcher: Searcher | None = None
        self._generation = -1  # of the index the current searcher was built from
        self._checked = 0.0
        self.last_sync: LastSync | None = None

    def sync(self, *, progress: bool = False, only: Collection[str] | None = None) -> SyncReport:
        """Bring the index up to date with the folder; questions meanwhile see the last snapshot.

        While the store changes underneath, the current searcher answers from its own
        in-memory snapshot (exact scan, no store queries); the new snapshot is built
        and swapped in whole when the sync ends. Two syncs never overlap.
        """
        with self._sync_lock:
            if not self.lease.acquire():
                raise SyncBusy("another Footnote process is syncing this index; it will be current when that finishes")
            before = self._searcher
            if before is not None:
                self._searcher = before.detached()
            t0 = time.time()
            try:
                report = self.indexer.sync(progress=progress, only=only)
                if report.indexed or report.removed or report.failed or report.renamed:
                    self.lease.bump()
            except Exception as exc:
                self._searcher = before
                self.last_sync = LastSync(time.time(), time.time() - t0, None, str(exc))
                raise
            finally:
                self.lease.release()
            self._generation = self.lease.generation()
            self._searcher = self._build() if before is not None else None
            if report.chunks_embedded:
                release_memory()
            self.last_sync = LastSync(time.time(), report.seconds, report)
            return report

    def searcher(self) -> Searcher:
        """The current searcher; rebuilt when another process or replica changed the index."""
        s = self._searcher
        now = time.monotonic()
        if s is not None and now - self._checked >= self.cfg.refresh_s and not self._sync_lock.locked():
            self._checked = now
            if self.lease.generation() != self._generation:
                s = None
        if s is None:
            generation = self.lease.generation()
            s = self._build()
            self._searcher, self._generation, self._checked = s, generation, now
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
