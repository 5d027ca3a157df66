"""Sync a docs folder into the index: extract, chunk, embed, store, record.

One broken file never stops the others: it becomes a ``failed`` record with its
reason and is retried on the next sync. Chunk counts in the manifest are read back
from the store after writing, never declared.

Write order is what makes a crash recoverable: a document's manifest row is marked
``writing`` before its old chunks are touched and ``indexed`` only after its new ones
are stored, and every sync first removes store entries the manifest does not own.

Only regular files inside the docs folder are read: a symlink (to a file or a folder)
that resolves outside it is skipped with its reason, never indexed (its text could be
quoted in Slack); a named pipe, socket or device is skipped without being opened (a
FIFO's reader waits for a writer forever).
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import stat
import time
import unicodedata
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from retrieval.errors import ExtractionError, StoreError
from retrieval.index import FAILED, INDEXED, STALE, WRITING, DocRecord, Manifest, Stamps, VectorStore
from retrieval.ingest.chunk import ChunkerConfig, chunk_document, sentences
from retrieval.ingest.extract import Extractor, extractor_for
from retrieval.ingest.sandbox import ExtractionRunner
from retrieval.models import Embedder
from retrieval.types import Chunk

# p2: a sentence runs on across a soft line wrap (sentence vectors rebuilt); p3: its edge cases;
# p4: an abbreviation's or a number's stop before lower case goes on ("f.eks. moms", "1. juli").
PIPELINE_VERSION = "p4"
EMBED_BATCH_CHUNKS = 128
LONG_EMBED = 2000  # texts in one call past which it shows its own bar: ten seconds or more on 2 cores
TEMP_PATTERNS = ("~$*", ".~lock*", "*.tmp", "*.swp", "*~")


@dataclass
class SyncReport:
    """What one sync did; the totals shown to people come from the manifest, not from here."""

    indexed: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)  # old path -> new path
    failed: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    chunks_embedded: int = 0  # texts actually sent to the model (reused vectors are not)
    chunks_reused: int = 0
    seconds: float = 0.0


Progress = Callable[[int, int], None]  # (documents done, documents to do)


class _Counted:
    """The sync's progress: a bar for people, and counts for whoever asked (the server's /healthz)."""

    def __init__(self, bar: tqdm[Any], on_progress: Progress | None) -> None:
        self.bar, self.on_progress, self.done = bar, on_progress, 0
        self._tell()

    def update(self, n: int = 1, last: str | None = None) -> None:
        if last is not None:
            self.bar.set_postfix_str(last, refresh=False)
        self.bar.update(n)
        self.done += n
        self._tell()

    def working_on(self, rel: str) -> None:
        """Name the document being read and chunked: a large one takes minutes before it counts."""
        self.bar.set_postfix_str(rel[-40:], refresh=True)

    @property
    def shown(self) -> bool:
        return not self.bar.disable

    def close(self) -> None:
        self.bar.close()

    def _tell(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.done, int(self.bar.total or 0))


@dataclass(frozen=True)
class _Prepared:
    """A document extracted and chunked, waiting for its batch to be embedded."""

    rel: str
    digest: str
    size: int
    title: str
    chunks: list[Chunk]
    sentences: list[list[str]]
    stamps: Stamps
    reuse: list[str]  # stored documents whose vectors may be reused


@dataclass(frozen=True)
class SourceFile:
    rel: str
    path: Path
    skip: str | None = None  # why this file is not indexed (shown in `footnote index` and `status`)
    unlisted: bool = False  # a folder that could not be listed: what it held is kept, not removed


def no_folder(docs_dir: Path) -> str:
    """Why ``docs_dir`` is no docs folder (it is missing, or it is a file)."""
    if docs_dir.exists():
        return f"docs folder not found: {docs_dir} is a file, not a folder; give the folder that holds it"
    return f"docs folder not found: {docs_dir}"


def walk(docs_dir: Path, ignore: Sequence[str] = ()) -> Iterator[SourceFile]:
    """Every candidate file under ``docs_dir``, skipping hidden, temporary and ignored ones.

    A symlink whose target lies outside the folder comes with a ``skip`` reason, a linked
    folder too (it is not entered): the folder is the boundary of what may be quoted. So
    does anything that is not a regular file (a FIFO, a socket, a device), found by
    ``stat``, never by opening it. A linked folder that stays inside is not entered either
    (its files are found at their own path) and is not listed. A folder that cannot be
    listed (no permission, a network drive's I/O error) comes ``unlisted``, with its reason.
    """
    root_dir = docs_dir.resolve()
    errors: list[OSError] = []  # os.walk would pass over them without a word
    for root, dirs, files in os.walk(docs_dir, onerror=errors.append, followlinks=False):
        yield from _unlisted(errors, docs_dir)
        here = Path(root).relative_to(docs_dir).as_posix()
        # An ignored folder is not entered: `archive` or `archive/` skips all it holds.
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not _ignored_folder(_rel(here, d), ignore))
        for name in dirs:
            full, rel = Path(root) / name, _rel(here, name)
            if full.is_symlink():
                reason = _outside(full, root_dir)
                if reason is not None:
                    yield SourceFile(rel, full, reason)
        for name in sorted(files):
            if name.startswith(".") or any(fnmatch.fnmatch(name, p) for p in TEMP_PATTERNS):
                continue
            full, rel = Path(root) / name, _rel(here, name)
            if _ignored(rel, ignore):
                continue
            if not _utf8(rel):
                # The index stores names as UTF-8 text; the bytes are shown as \xNN escapes.
                shown = os.fsencode(rel).decode("utf-8", "backslashreplace")
                yield SourceFile(
                    shown, full, "its name is not valid UTF-8 (a drive in another encoding?): rename it to index it"
                )
                continue
            yield SourceFile(rel, full, _outside(full, root_dir) or _not_regular(full))
    yield from _unlisted(errors, docs_dir)


def _rel(folder: str, name: str) -> str:
    return name if folder == "." else f"{folder}/{name}"


def _ignored(rel: str, ignore: Sequence[str]) -> bool:
    """Whether a glob of ``FOOTNOTE_IGNORE`` matches the path. Both are compared in composed
    letters (NFC): a Mac names "Årsrapporter" with "A" + a combining ring, and the setting was
    typed with "Å", the same name to the one who wrote it."""
    path = unicodedata.normalize("NFC", rel)
    return any(fnmatch.fnmatch(path, unicodedata.normalize("NFC", p)) for p in ignore)


def _ignored_folder(rel: str, ignore: Sequence[str]) -> bool:
    """Whether a folder is ignored: a glob that names it, with or without its slash."""
    return _ignored(rel, [p.rstrip("/") for p in ignore])


def _unlisted(errors: list[OSError], docs_dir: Path) -> Iterator[SourceFile]:
    """The folders whose listing failed since the last call, each once."""
    while errors:
        exc = errors.pop(0)
        path = Path(exc.filename) if exc.filename else docs_dir
        rel = path.relative_to(docs_dir).as_posix() if path.is_relative_to(docs_dir) else "."
        why = f"cannot list this folder ({exc.strerror or exc}): the documents indexed from it are kept as they are"
        yield SourceFile(rel, path, why, unlisted=True)


def _under(path: str, folder: str) -> bool:
    """Whether the document ``path`` lies in ``folder`` (both relative to the docs folder)."""
    return folder == "." or path.startswith(folder + "/")


def _utf8(name: str) -> bool:
    """Whether a name from the file system is UTF-8: bytes that are not arrive as lone surrogates."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _outside(path: Path, root_dir: Path) -> str | None:
    """The skip reason for a symlink that leaves the docs folder, else None."""
    if not path.is_symlink():
        return None
    try:
        target = path.resolve()
    except (OSError, RuntimeError):  # a loop of links (RuntimeError before 3.13): leads nowhere, and reading it says so
        return None
    if target.is_relative_to(root_dir):
        return None
    kind = "a folder" if target.is_dir() else "a file"
    return f"symlink to {kind} outside the docs folder ({target}): not indexed"


_SPECIAL = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _not_regular(path: Path) -> str | None:
    """The skip reason for what is not a regular file (its ``stat``: the file is not opened)."""
    try:
        mode = path.stat().st_mode  # through a symlink that stays inside: what it leads to
    except OSError:
        return None  # a dangling link, a file gone meanwhile: reading it says why (a failure)
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _SPECIAL if test(mode)), "not a regular file")
    return f"{kind}, not a regular file: not read"


def _fingerprint(info: os.stat_result) -> tuple[int, ...]:
    """What changes when a file's bytes may have: size, times (ns) and which file it is."""
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev)


def _unreadable(path: Path, exc: OSError) -> str:
    """Why ``path`` could not be opened. "No such file" of a file the listing shows puzzles
    whoever reads it: for a symlink it is its target that is gone, and the reason says so."""
    if isinstance(exc, FileNotFoundError):
        try:
            return f"a broken symlink: its target {os.readlink(path)} does not exist"
        except OSError:
            pass  # not a symlink: a file removed since the listing
    if exc.errno == errno.ELOOP:
        return "a symlink loop: its links lead back to each other and never to a file"
    return f"cannot read the file: {exc.strerror or exc}"


class Indexer:
    """Keeps the store and the manifest true to one docs folder."""

    def __init__(
        self,
        docs_dir: Path,
        store: VectorStore,
        manifest: Manifest,
        embedder: Embedder,
        chunker: ChunkerConfig,
        max_file_bytes: int,
        ignore: Sequence[str] = (),
        runner: ExtractionRunner | None = None,
        ocr: bool = False,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.ocr = ocr
        self.clock = clock  # times a sync (SyncReport.seconds)
        self.docs_dir = docs_dir
        self.store = store
        self.manifest = manifest
        self.embedder = embedder
        self.chunker = chunker
        self.max_file_bytes = max_file_bytes
        self.ignore = tuple(ignore)
        self.runner = runner or ExtractionRunner()
        # path -> (its stat when last read, the sha256 of what was read): unchanged files are
        # not read again by this process's next syncs (the first sync after a start reads all).
        self._read_as: dict[str, tuple[tuple[int, ...], str]] = {}

    def stamps(self, ex: Extractor) -> Stamps:
        return Stamps(
            self.embedder.name,
            self.embedder.dimension,
            f"{PIPELINE_VERSION}:{self.chunker.version}",
            ex.name,
            ex.version,
        )

    def expected_stamps(self, path: str) -> Stamps | None:
        ex = extractor_for(path, self.ocr)
        return self.stamps(ex) if ex else None

    def would_be_stale(self) -> dict[str, DocRecord]:
        """Indexed documents built with another model, pipeline or extractor, as ``stale``
        records: what :meth:`mark_stale` would write. Reads only."""
        out = {}
        for rec in self.manifest.all().values():
            want = self.expected_stamps(rec.path)
            if rec.state == INDEXED and rec.stamps != want:
                out[rec.path] = replace(rec, state=STALE, reason=_stamp_change(rec.stamps, want))
        return out

    def mark_stale(self) -> list[str]:
        """Documents built with another model, pipeline or extractor become ``stale``.

        They stay searchable from their old vectors while those are of the current
        embedding model (the snapshot checks), and the next sync rebuilds them.
        """
        stale = self.would_be_stale()
        self.manifest.put_many(list(stale.values()))
        return list(stale)

    def survey(self) -> tuple[dict[str, str], list[str]]:
        """What a sync would make of the folder now (reads only): the files it would skip,
        with the reason, and the paths it would read."""
        skipped: dict[str, str] = {}
        read: list[str] = []
        if not self.docs_dir.is_dir():
            return skipped, read
        for src in walk(self.docs_dir, self.ignore):
            if src.skip:
                skipped[src.rel] = src.skip
            elif extractor_for(src.rel, self.ocr) is None:
                skipped[src.rel] = "unsupported file type"
            else:
                read.append(src.rel)
        return skipped, read

    def sync(
        self,
        *,
        progress: bool = False,
        only: Collection[str] | None = None,
        on_progress: Progress | None = None,
        allow_empty: bool = False,
    ) -> SyncReport:
        """Bring the store and manifest in line with the folder (or, with ``only``, those paths).

        ``on_progress(done, total)`` is told how many of the documents to (re)index are done:
        at (0, total) once the folder is read, then after each one.

        A folder that holds nothing while the index holds documents is refused (a
        :class:`StoreError`) before anything is removed, unless ``allow_empty``: a shared
        drive that is not mounted leaves an empty folder behind, and removing every document
        would also retire every pair the team confirmed."""
        if not self.docs_dir.is_dir():
            raise StoreError(no_folder(self.docs_dir))
        t0 = self.clock()
        report = SyncReport()
        self._drop_orphans()
        self.mark_stale()
        known = self.manifest.all()
        seen: set[str] = set()
        todo: list[tuple[SourceFile, Extractor, bytes, str]] = []
        for src in walk(self.docs_dir, self.ignore):
            if only is not None and src.rel not in only:
                seen.add(src.rel)
                continue
            if src.skip:
                report.skipped[src.rel] = src.skip
                if src.unlisted:  # not seen is not gone: its documents stay until it can be listed
                    seen.update(p for p in known if _under(p, src.rel))
                continue
            ex = extractor_for(src.rel, self.ocr)
            if ex is None:
                report.skipped[src.rel] = "unsupported file type"
                continue
            seen.add(src.rel)
            rec = known.get(src.rel)
            if rec and rec.state == INDEXED and self._untouched(src, rec.content_hash):
                report.unchanged += 1  # not read again: a drive's unchanged gigabytes each sync
                continue
            data, reason, read_as = self._read(src)
            if data is None:
                self._fail(src.rel, "", reason or "unreadable", report)
                continue
            digest = hashlib.sha256(data).hexdigest()
            if read_as is not None:
                self._read_as[src.rel] = (read_as, digest)
            if rec and rec.state == INDEXED and rec.content_hash == digest:
                report.unchanged += 1
                continue
            todo.append((src, ex, data, digest))
        gone = sorted(p for p in set(known) - seen if only is None or p in only)
        if only is None and known and not seen and not report.skipped and not allow_empty:
            raise StoreError(
                f"the docs folder {self.docs_dir} is empty, yet the index holds {len(known)} documents from it: "
                "is the drive mounted? Nothing was removed; to empty the index, run `footnote index --allow-empty`"
            )
        # A gone file whose exact bytes reappear under a new path was renamed: its
        # vectors move with it instead of being computed again.
        moved_from = {known[p].content_hash: p for p in gone if known[p].state in (INDEXED, STALE)}
        bar = _Counted(
            tqdm(total=len(todo), desc="Indexing", unit="doc", disable=not progress or not todo), on_progress
        )
        batch: list[_Prepared] = []
        for src, ex, data, digest in todo:
            old = moved_from.get(digest)
            if old is not None:
                report.renamed[old] = src.rel
            bar.working_on(src.rel)
            prepared = self._prepare(src, ex, data, digest, report, [src.rel, *([old] if old else [])], known)
            if prepared is None:
                bar.update()
                continue
            batch.append(prepared)
            # Many small documents are embedded together: one model call per batch, not per file.
            if sum(len(p.chunks) for p in batch) >= EMBED_BATCH_CHUNKS:
                self._write(batch, known, report, bar)
                batch = []
        self._write(batch, known, report, bar)
        bar.close()
        if gone:
            self.store.delete_paths(gone)
            for p in gone:
                self.manifest.delete(p)
                self._read_as.pop(p, None)
            report.removed = [p for p in gone if p not in report.renamed]
        report.seconds = self.clock() - t0
        return report

    def _read(self, src: SourceFile) -> tuple[bytes | None, str | None, tuple[int, ...] | None]:
        """The file's bytes, or why not, and its :func:`_fingerprint` when it was read whole at
        the size it had when opened. Opened without blocking and checked again once open: a
        file swapped for a FIFO after :func:`walk` looked at it cannot hang the sync."""
        try:
            fd = os.open(src.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            return None, _unreadable(src.path, exc), None
        with os.fdopen(fd, "rb") as f:
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    return None, "not a regular file: not read", None
                if info.st_size > (limit := self.max_file_bytes):
                    return None, f"too large: {info.st_size / 1e6:.1f} MB is over the {limit / 1e6:.1f} MB limit", None
                data = f.read()
            except OSError as exc:
                return None, f"cannot read the file: {exc.strerror or exc}", None
        return data, None, _fingerprint(info) if len(data) == info.st_size else None

    def _untouched(self, src: SourceFile, digest: str) -> bool:
        """Whether this process read the file before, as it stands now, and its bytes were
        ``digest``. A write changes its ctime, which no tool sets back (``touch -d`` and
        ``cp -p`` set the mtime only), so the file need not be read to know it is the same."""
        known = self._read_as.get(src.rel)
        if known is None or known[1] != digest:
            return False
        try:
            return _fingerprint(os.stat(src.path)) == known[0]
        except OSError:
            return False

    def _prepare(
        self,
        src: SourceFile,
        ex: Extractor,
        data: bytes,
        digest: str,
        report: SyncReport,
        reuse: Sequence[str],
        known: dict[str, DocRecord],
    ) -> _Prepared | None:
        """Extract and chunk one file; a failure is recorded and gives None."""
        try:
            doc = self.runner.extract(ex, src.rel, data)
        except ExtractionError as exc:
            self._fail(src.rel, digest, str(exc), report, size=len(data))
            return None
        except Exception as exc:  # a parser bug on one file must not stop the folder
            self._fail(src.rel, digest, f"extractor crashed: {type(exc).__name__}: {exc}", report, size=len(data))
            return None
        chunks = chunk_document(doc, self.chunker, self.embedder.count_tokens)
        if not chunks:
            self._fail(src.rel, digest, "no indexable text after extraction", report, size=len(data))
            return None
        stamps = self.stamps(ex)
        # A vector depends only on the model and the text, so any stored document of
        # the same model can lend its vectors, even one built by another pipeline.
        usable = [p for p in reuse if (r := known.get(p)) and r.chunks > 0 and _same_model(r.stamps, stamps)]
        return _Prepared(src.rel, digest, len(data), doc.title, chunks, [sentences(c) for c in chunks], stamps, usable)

    def _write(
        self,
        batch: list[_Prepared],
        known: dict[str, DocRecord],
        report: SyncReport,
        bar: _Counted,
    ) -> None:
        """Embed what the batch needs (reusing stored vectors), then store its documents together."""
        if not batch:
            return
        chunk_cache, sentence_cache = self.store.vectors_for(sorted({p for b in batch for p in b.reuse}))
        chunks = [c for b in batch for c in b.chunks]
        fresh = {c.text for c in chunks} - chunk_cache.keys()
        vectors = self._embed(chunk_cache, [c.text for c in chunks], bar.shown)
        groups = [g for b in batch for g in b.sentences]
        flat = self._embed(sentence_cache, [s for g in groups for s in g], bar.shown)
        ends = np.cumsum([len(g) for g in groups])
        per_chunk = [flat[end - len(g) : end] for g, end in zip(groups, ends, strict=True)]
        # Crash safety: every document of the batch is marked "being written" before its
        # old chunks go, and "indexed" only after its new ones are stored and counted.
        self.manifest.put_many([self._writing(b.rel, b.digest, known.get(b.rel)) for b in batch])
        paths = [b.rel for b in batch]
        self.store.delete_paths(paths)
        self.store.add(chunks, vectors, groups, per_chunk)
        stored = self.store.count_by_path(paths)
        self.manifest.put_many(
            [DocRecord(b.rel, b.digest, INDEXED, None, stored.get(b.rel, 0), b.stamps, b.size, b.title) for b in batch]
        )
        for b in batch:
            report.indexed.append(b.rel)
            n_fresh = sum(c.text in fresh for c in b.chunks)
            fresh -= {c.text for c in b.chunks}  # a text shared by two documents counts once
            report.chunks_embedded += n_fresh
            report.chunks_reused += len(b.chunks) - n_fresh
        bar.update(len(batch), batch[-1].rel[-40:])

    def _embed(self, cache: dict[str, np.ndarray], texts: list[str], progress: bool = False) -> np.ndarray:
        """Vectors for ``texts``, embedding only those the cache does not hold (and adding them to it).
        ``progress``: the embedder shows its own bar when the texts are many (a large document)."""
        missing = list(dict.fromkeys(t for t in texts if t not in cache))
        if missing:
            shown = progress and len(missing) >= LONG_EMBED
            cache.update(zip(missing, self.embedder.embed(missing, progress=shown), strict=True))
        if not texts:
            return np.zeros((0, self.embedder.dimension), np.float32)
        return np.stack([cache[t] for t in texts]).astype(np.float32)

    @staticmethod
    def _writing(rel: str, digest: str, old: DocRecord | None) -> DocRecord:
        """The record while a document's chunks are rewritten: the store may hold a partial write."""
        return DocRecord(
            rel,
            digest,
            WRITING,
            "indexing did not finish",
            0,
            old.stamps if old else None,
            old.size if old else 0,
            old.title if old else "",
        )

    def _fail(self, rel: str, digest: str, reason: str, report: SyncReport, size: int = 0) -> None:
        """A failed document stays out of search: its old chunks go too."""
        self.store.delete_paths([rel])
        self.manifest.put(DocRecord(rel, digest, FAILED, reason, 0, None, size))
        report.failed[rel] = reason

    def _drop_orphans(self) -> None:
        """Make the store and the manifest agree again after a crash.

        Store entries of documents the manifest does not know, has failed, or was
        writing when the process died are removed; a document whose stored count
        differs from its record is rebuilt.
        """
        known = self.manifest.all()
        stored = self.store.count_by_path()
        doomed = []
        for p, n in stored.items():
            rec = known.get(p)
            if rec is None or rec.state in (FAILED, WRITING) or rec.chunks != n:
                doomed.append(p)
        self.store.delete_paths(doomed)
        for p, rec in known.items():
            if rec.state == WRITING:  # the process died while writing it
                self.manifest.put(replace(rec, state=STALE, reason="indexing did not finish", chunks=0))
            elif rec.state != FAILED and stored.get(p, 0) != rec.chunks and rec.chunks != 0:
                reason = "store and manifest disagreed; rebuilding"
                self.manifest.put(replace(rec, state=STALE, reason=reason, chunks=0))


def _same_model(a: Stamps | None, b: Stamps) -> bool:
    return a is not None and (a.embedding_model, a.dimension) == (b.embedding_model, b.dimension)


def _stamp_change(old: Stamps | None, new: Stamps | None) -> str:
    if old is None or new is None:
        return "no extractor handles this file any more" if new is None else "built without stamps"
    diffs = [
        f"{name} {getattr(old, name)} → {getattr(new, name)}"
        for name in ("embedding_model", "dimension", "pipeline", "extractor", "extractor_version")
        if getattr(old, name) != getattr(new, name)
    ]
    return "rebuild needed: " + ", ".join(diffs)
