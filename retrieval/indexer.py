"""Sync a docs folder into the index: extract, chunk, embed, store, record.

One broken file never stops the others: it becomes a ``failed`` record with its
reason and is retried on the next sync. Chunk counts in the manifest are read back
from the store after writing, never declared.

Write order is what makes a crash recoverable: a document's manifest row is marked
``stale`` before its old chunks are touched and ``indexed`` only after its new ones
are stored, and every sync first removes store entries the manifest does not own.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from retrieval.chunk import ChunkerConfig, chunk_document, sentences
from retrieval.embed import Embedder
from retrieval.errors import ExtractionError, StoreError
from retrieval.extract import Extractor, extractor_for
from retrieval.manifest import FAILED, INDEXED, STALE, DocRecord, Manifest, Stamps
from retrieval.store import ChromaStore

PIPELINE_VERSION = "p1"
TEMP_PATTERNS = ("~$*", ".~lock*", "*.tmp", "*.swp", "*~")


@dataclass
class SyncReport:
    """What one sync did; the totals shown to people come from the manifest, not from here."""

    indexed: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    chunks_embedded: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class SourceFile:
    rel: str
    path: Path


def walk(docs_dir: Path, ignore: Sequence[str] = ()) -> Iterator[SourceFile]:
    """Every candidate file under ``docs_dir``, skipping hidden, temporary and ignored ones."""
    for root, dirs, files in os.walk(docs_dir, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith(".") or any(fnmatch.fnmatch(name, p) for p in TEMP_PATTERNS):
                continue
            full = Path(root) / name
            rel = full.relative_to(docs_dir).as_posix()
            if any(fnmatch.fnmatch(rel, p) for p in ignore):
                continue
            yield SourceFile(rel, full)


class Indexer:
    """Keeps the store and the manifest true to one docs folder."""

    def __init__(
        self,
        docs_dir: Path,
        store: ChromaStore,
        manifest: Manifest,
        embedder: Embedder,
        chunker: ChunkerConfig,
        max_file_bytes: int,
        ignore: Sequence[str] = (),
    ) -> None:
        self.docs_dir = docs_dir
        self.store = store
        self.manifest = manifest
        self.embedder = embedder
        self.chunker = chunker
        self.max_file_bytes = max_file_bytes
        self.ignore = tuple(ignore)

    def stamps(self, ex: Extractor) -> Stamps:
        return Stamps(
            self.embedder.name,
            self.embedder.dimension,
            f"{PIPELINE_VERSION}:{self.chunker.version}",
            ex.name,
            ex.version,
        )

    def sync(self, *, progress: bool = False) -> SyncReport:
        if not self.docs_dir.is_dir():
            raise StoreError(f"docs folder not found: {self.docs_dir}")
        t0 = time.perf_counter()
        report = SyncReport()
        self._drop_orphans()
        known = self.manifest.all()
        seen: set[str] = set()
        todo: list[tuple[SourceFile, Extractor, bytes, str]] = []
        for src in walk(self.docs_dir, self.ignore):
            ex = extractor_for(src.rel)
            if ex is None:
                report.skipped[src.rel] = "unsupported file type"
                continue
            seen.add(src.rel)
            data, reason = self._read(src)
            if data is None:
                self._fail(src.rel, "", reason or "unreadable", report)
                continue
            digest = hashlib.sha256(data).hexdigest()
            rec = known.get(src.rel)
            if rec and rec.state == INDEXED and rec.content_hash == digest and rec.stamps == self.stamps(ex):
                report.unchanged += 1
                continue
            todo.append((src, ex, data, digest))
        gone = sorted(set(known) - seen)
        if gone:
            self.store.delete_paths(gone)
            for p in gone:
                self.manifest.delete(p)
            report.removed = gone
        bar = tqdm(todo, desc="Indexing", unit="doc", disable=not progress or not todo)
        for src, ex, data, digest in bar:
            bar.set_postfix_str(src.rel[-40:], refresh=False)
            self._index_one(src, ex, data, digest, report)
        report.seconds = time.perf_counter() - t0
        return report

    def _read(self, src: SourceFile) -> tuple[bytes | None, str | None]:
        try:
            size = src.path.stat().st_size
            if size > self.max_file_bytes:
                return None, f"too large: {size / 1e6:.1f} MB is over the {self.max_file_bytes / 1e6:.1f} MB limit"
            return src.path.read_bytes(), None
        except OSError as exc:
            return None, f"cannot read the file: {exc.strerror or exc}"

    def _index_one(self, src: SourceFile, ex: Extractor, data: bytes, digest: str, report: SyncReport) -> None:
        try:
            doc = ex.extract(src.rel, data)
        except ExtractionError as exc:
            self._fail(src.rel, digest, str(exc), report, size=len(data))
            return
        except Exception as exc:  # a parser bug on one file must not stop the folder
            self._fail(src.rel, digest, f"extractor crashed: {type(exc).__name__}: {exc}", report, size=len(data))
            return
        chunks = chunk_document(doc, self.chunker, self.embedder.count_tokens)
        if not chunks:
            self._fail(src.rel, digest, "no indexable text after extraction", report, size=len(data))
            return
        vectors = self.embedder.embed([c.text for c in chunks])
        sent_texts = [sentences(c.content) for c in chunks]
        flat = self.embedder.embed([s for group in sent_texts for s in group])
        per_chunk: list[np.ndarray] = []
        pos = 0
        for group in sent_texts:
            per_chunk.append(flat[pos : pos + len(group)])
            pos += len(group)
        self._mark_stale(src.rel, digest, "indexing did not finish")
        self.store.delete_paths([src.rel])
        self.store.add(chunks, vectors, per_chunk)
        stored = len(self.store.chunk_ids(src.rel))
        self.manifest.put(DocRecord(src.rel, digest, INDEXED, None, stored, self.stamps(ex), len(data), doc.title))
        report.indexed.append(src.rel)
        report.chunks_embedded += len(chunks)

    def _mark_stale(self, rel: str, digest: str, reason: str) -> None:
        old = self.manifest.get(rel)
        self.manifest.put(
            DocRecord(
                rel,
                digest,
                STALE,
                reason,
                old.chunks if old else 0,
                old.stamps if old else None,
                old.size if old else 0,
                old.title if old else "",
            )
        )

    def _fail(self, rel: str, digest: str, reason: str, report: SyncReport, size: int = 0) -> None:
        """A failed document stays out of search: its old chunks go too."""
        self.store.delete_paths([rel])
        self.manifest.put(DocRecord(rel, digest, FAILED, reason, 0, None, size))
        report.failed[rel] = reason

    def _drop_orphans(self) -> None:
        """Remove store entries the manifest does not own as indexed (left by a crash)."""
        known = self.manifest.all()
        stored = self.store.count_by_path()
        orphans = [p for p in stored if p not in known or known[p].state != INDEXED]
        self.store.delete_paths(orphans)
        for p, rec in known.items():
            if rec.state == INDEXED and stored.get(p, 0) != rec.chunks:
                self._mark_stale(p, "", "store and manifest disagreed; rebuilding")
