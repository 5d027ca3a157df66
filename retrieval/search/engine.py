"""The index and its searcher for one docs folder: syncs, and the current :class:`Snapshot`.

It builds nothing it depends on: the store, manifest, lease and extraction runner
are handed in (by ``bot/runtime.py`` in the product, by ``tests/fakes.py`` in
logic tests). It owns the current searcher, swapped whole after each sync, and
the rule that an index belongs to the one docs folder it was built from.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from retrieval.errors import FootnoteError, StoreError, StoreUnreachable, SyncBusy, disk_full, no_space
from retrieval.index import INDEXED, STALE, DocRecord, Lease, Manifest, Snapshot, VectorStore
from retrieval.ingest import (
    ChunkerConfig,
    ExtractionRunner,
    Flagged,
    Indexer,
    Progress,
    SyncReport,
    flagged,
    no_folder,
)
from retrieval.models import Embedder
from retrieval.search.languages import Languages
from retrieval.search.rerank import Reranker
from retrieval.search.searcher import SearchConfig, Searcher

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineConfig:
    docs_dir: Path
    chunker: ChunkerConfig
    search: SearchConfig
    max_file_bytes: int = 50_000_000
    ignore: tuple[str, ...] = ()
    ocr: bool = False  # read image-only PDF pages with tesseract
    refresh_s: float = 5.0  # how often a replica checks whether another one changed the index


class FolderMismatch(StoreError):
    """The index was built from another docs folder; syncing would replace all of it."""


def release_memory() -> None:
    """Hand freed heap back to the OS after a sync that embedded text.

    Embedding leaves ~100 MB of freed-but-kept malloc arenas (measured on the dev
    set); glibc's ``malloc_trim`` returns them. Elsewhere it is a no-op.
    """
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


@dataclass(frozen=True)
class LastSync:
    finished_at: float
    seconds: float
    report: SyncReport | None
    error: str | None = None


def check_folder(manifest: Manifest, docs_dir: Path) -> None:
    """Refuse a docs folder other than the one the index was built from.

    Syncing another folder would delete every document of the first one: after
    ``footnote index /mnt/drive``, a ``footnote serve`` that forgot
    FOOTNOTE_DOCS_DIR must not silently replace the index with the examples.
    Reads the manifest only (no model loads).
    """
    recorded = manifest.docs_folder()
    here = docs_dir.resolve()
    if recorded is not None and Path(recorded) != here:
        raise FolderMismatch(
            f"this index was built from {recorded}, not {here}; syncing would replace all of it. "
            f"Set FOOTNOTE_DOCS_DIR={recorded} (or pass that folder), or rebuild the index from the new "
            f"folder with --reindex-from {here}"
        )


def adopt_folder(manifest: Manifest, docs_dir: Path) -> None:
    """Make ``docs_dir`` the index's own folder (``--reindex-from``): the next sync rebuilds from it."""
    if not docs_dir.is_dir():
        raise StoreError(no_folder(docs_dir))
    manifest.set_docs_folder(str(docs_dir.resolve()))


class Engine:
    """The index and its searcher, for one docs folder."""

    def __init__(
        self,
        cfg: EngineConfig,
        embedder: Embedder,
        reranker: Reranker | None,
        *,
        store: VectorStore,
        manifest: Manifest,
        lease: Lease,
        runner: ExtractionRunner,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        languages: Languages | None = None,
    ) -> None:
        self.cfg = cfg
        self.languages = languages or Languages()  # each document's, and each question's, language
        self.embedder = embedder
        self.reranker = reranker
        self.store = store
        self.manifest = manifest
        self.lease = lease
        self.indexer = Indexer(
            cfg.docs_dir, store, manifest, embedder, cfg.chunker, cfg.max_file_bytes, cfg.ignore, runner, cfg.ocr
        )
        self._clock = clock  # monotonic: when to look for another process's sync
        self._wall = wall_clock  # for LastSync, shown to people
        self._sync_lock = threading.Lock()  # two syncs never overlap
        self._swap_lock = threading.Lock()  # guards the searcher and its generation
        self._searcher: Searcher | None = None
        self._generation = -1  # of the index the current searcher was built from
        self._checked = 0.0
        self.last_sync: LastSync | None = None

    # The docs folder an index belongs to.

    def docs_folder(self) -> Path:
        return self.cfg.docs_dir.resolve()

    def check_folder(self) -> None:
        """Refuse a docs folder other than the one this index was built from (:func:`check_folder`)."""
        check_folder(self.manifest, self.cfg.docs_dir)

    def adopt_folder(self) -> None:
        """Make this engine's docs folder the index's own (``--reindex-from``): the next sync rebuilds from it."""
        adopt_folder(self.manifest, self.cfg.docs_dir)

    # Syncing.

    def sync(
        self,
        *,
        progress: bool = False,
        only: Collection[str] | None = None,
        on_progress: Progress | None = None,
        allow_empty: bool = False,
    ) -> SyncReport:
        """Bring the index up to date with the folder; questions meanwhile see the last snapshot.

        While the store changes underneath, the current searcher answers from its own
        in-memory snapshot; the new snapshot is built and swapped in whole when the
        sync ends. Two syncs never overlap. A folder other than the index's own is
        refused (:class:`FolderMismatch`) before anything is written.
        """
        with self._sync_lock:
            self.check_folder()
            if not self.lease.acquire():
                raise SyncBusy("another Footnote process is syncing this index; it will be current when that finishes")
            t0 = self._wall()
            try:
                if self.manifest.docs_folder() is None and self.cfg.docs_dir.is_dir():
                    self.manifest.set_docs_folder(str(self.docs_folder()))
                report = self.indexer.sync(
                    progress=progress, only=only, on_progress=on_progress, allow_empty=allow_empty
                )
                if report.indexed or report.removed or report.failed or report.renamed:
                    self.lease.bump()
            except Exception as exc:
                # Said for a person already (the store's own "no space left"): not said twice.
                failure = no_space(exc) if disk_full(exc) and not isinstance(exc, FootnoteError) else exc
                self.last_sync = LastSync(self._wall(), self._wall() - t0, None, str(failure))
                if failure is exc:
                    raise
                raise failure from exc
            finally:
                self.lease.release()
            # Built before the swap, so questions keep the old searcher meanwhile.
            generation = self.lease.generation()
            fresh = self._build() if self._searcher is not None else None
            with self._swap_lock:
                self._searcher, self._generation, self._checked = fresh, generation, self._clock()
            if report.chunks_embedded:
                # An embedder that loaded a runtime only for a sync's batches gives it back (multilingual-e5's).
                release = getattr(self.embedder, "release", None)
                if callable(release):
                    release()
                release_memory()
            self.last_sync = LastSync(self._wall(), report.seconds, report)
            return report

    def searcher(self) -> Searcher:
        """The current searcher; rebuilt when another process or replica changed the index.

        Safe from any thread: one caller builds, the others wait for its result.
        During this process's own sync the old searcher keeps answering.
        """
        with self._swap_lock:
            s = self._searcher
            now = self._clock()
            if s is not None and now - self._checked >= self.cfg.refresh_s and not self._sync_lock.locked():
                self._checked = now
                if self._changed_elsewhere():
                    s = None
            if s is None:
                generation = self.lease.generation()
                s = self._build()
                self._searcher, self._generation, self._checked = s, generation, now
            return s

    def _changed_elsewhere(self) -> bool:
        """Whether another process or replica changed the index since this snapshot. A Chroma
        server that does not answer changed nothing that could be read: the snapshot in
        memory goes on answering, and the next check after it is back reads the change."""
        try:
            return self.lease.generation() != self._generation
        except StoreUnreachable as exc:
            log.warning("answering from the index in memory: %s", exc)
            return False

    def mark_stale(self) -> list[str]:
        """Record documents whose stamps no longer match the configured pipeline (writes)."""
        with self._sync_lock:
            return self.indexer.mark_stale()

    def flagged(self) -> list[Flagged]:
        """Instructions planted for an assistant in the searchable documents: never evidence,
        listed by ``footnote status`` so their owner can look."""
        return flagged(self.searcher().snapshot.chunks)

    def records(self) -> dict[str, DocRecord]:
        """Every document record as it would be after :meth:`mark_stale`, without writing anything."""
        return {**self.manifest.all(), **self.indexer.would_be_stale()}

    def _build(self) -> Searcher:
        snapshot = self._snapshot()
        found = dict(Counter(snapshot.languages.values()))
        if found and found != self.manifest.languages():  # the drive's languages (the embedding model may follow them)
            self.manifest.set_languages(found)
        if snapshot.passages_in and snapshot.passages_in != self.manifest.passages_by_language():
            self.manifest.set_passages_by_language(snapshot.passages_in)
        return Searcher(snapshot, self.embedder, self.cfg.search, self.reranker, self.languages)

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
        return Snapshot.build(stored, self.embedder.name, keep=ok.__contains__, languages=self.languages.of(stored, ok))
