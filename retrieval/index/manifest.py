"""The manifest: one row per document in the docs folder (SQLite in the data dir).

It records what the indexer really stored: state (``indexed``, ``failed``,
``stale``, or ``writing`` while its chunks are being replaced), the failure reason,
the chunk count read back from the store, and the stamps (embedding model,
dimension, pipeline version, extractor) that decide when a document must be
rebuilt. It also remembers the docs folder the index was built from.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from retrieval.errors import StoreError
from retrieval.index.records import SharedRecords

INDEXED, FAILED, STALE = "indexed", "failed", "stale"
# The store may hold a partial write of this document (a sync is writing it, or died
# doing so); it is never searched, and the next sync rebuilds it.
WRITING = "writing"


@dataclass(frozen=True)
class Stamps:
    """What a document's vectors were built with; any difference makes it stale."""

    embedding_model: str
    dimension: int
    pipeline: str
    extractor: str
    extractor_version: str


@dataclass(frozen=True)
class DocRecord:
    path: str
    content_hash: str
    state: str
    reason: str | None
    chunks: int
    stamps: Stamps | None
    size: int = 0
    title: str = ""
    updated_at: float = field(default_factory=time.time)

    def as_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "state": self.state,
            "reason": self.reason,
            "chunks": self.chunks,
            "stamps": asdict(self.stamps) if self.stamps else None,
            "title": self.title,
            "hash": self.content_hash,
            "size": self.size,
            "updated_at": self.updated_at,
        }


_SCHEMA = """
CREATE TABLE IF NOT EXISTS index_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    path TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT,
    chunks INTEGER NOT NULL,
    stamps TEXT,
    size INTEGER NOT NULL,
    title TEXT NOT NULL,
    updated_at REAL NOT NULL
);
"""


class Manifest(Protocol):
    """Where document records live: SQLite on disk, or the shared vector store in server mode."""

    def all(self) -> dict[str, DocRecord]: ...

    def get(self, path: str) -> DocRecord | None: ...

    def put(self, rec: DocRecord) -> None: ...

    def put_many(self, recs: list[DocRecord]) -> None: ...

    def delete(self, path: str) -> None: ...

    def totals(self) -> dict[str, int]: ...

    def docs_folder(self) -> str | None:
        """The (resolved) docs folder this index was built from; None for a new index."""
        ...

    def set_docs_folder(self, folder: str) -> None: ...

    def languages(self) -> dict[str, int]:
        """How many documents are in each language, as the last sync found them ({} before one)."""
        ...

    def set_languages(self, counts: Mapping[str, int]) -> None: ...

    def passages_by_language(self) -> dict[str, int]:
        """How many passages are in each language, as the last sync found them ({} before one)."""
        ...

    def set_passages_by_language(self, counts: Mapping[str, int]) -> None: ...


def totals(recs: Iterable[DocRecord]) -> dict[str, int]:
    recs = list(recs)
    counts = Counter(r.state for r in recs)
    return {
        "documents": len(recs),
        INDEXED: counts.get(INDEXED, 0),
        FAILED: counts.get(FAILED, 0),
        STALE: counts.get(STALE, 0) + counts.get(WRITING, 0),  # both wait for a rebuild
        "chunks": sum(r.chunks for r in recs if r.state in (INDEXED, STALE) and r.chunks > 0),
    }


def to_fields(r: DocRecord) -> dict[str, str | int | float]:
    """A record as flat scalar fields (what a metadata store accepts: no None, no nesting)."""
    return {
        "content_hash": r.content_hash,
        "state": r.state,
        "reason": r.reason or "",
        "chunks": r.chunks,
        "stamps": json.dumps(asdict(r.stamps)) if r.stamps else "",
        "size": r.size,
        "title": r.title,
        "updated_at": r.updated_at,
    }


def from_fields(path: str, f: Mapping[str, Any]) -> DocRecord:
    stamps = Stamps(**json.loads(str(f["stamps"]))) if f.get("stamps") else None
    state, chunks = str(f["state"]), int(f["chunks"])
    if chunks < 0:  # written before the "writing" state existed: -1 meant the same
        state, chunks = WRITING, 0
    return DocRecord(
        path,
        str(f["content_hash"]),
        state,
        str(f["reason"] or "") or None,
        chunks,
        stamps,
        int(f["size"]),
        str(f["title"]),
        float(f["updated_at"]),
    )


FIELDS = ("content_hash", "state", "reason", "chunks", "stamps", "size", "title", "updated_at")
_SELECT = f"SELECT path, {', '.join(FIELDS)} FROM documents"


class _LanguageCounts:
    """The per-language counts a manifest keeps among the index's own facts (documents and
    passages per language, as JSON), over the store's ``_counts`` and ``_set_counts``."""

    def _counts(self, key: str) -> dict[str, int]:
        raise NotImplementedError

    def _set_counts(self, key: str, counts: Mapping[str, int]) -> None:
        raise NotImplementedError

    def languages(self) -> dict[str, int]:
        return self._counts("languages")

    def set_languages(self, counts: Mapping[str, int]) -> None:
        self._set_counts("languages", counts)

    def passages_by_language(self) -> dict[str, int]:
        return self._counts("passages_by_language")

    def set_passages_by_language(self, counts: Mapping[str, int]) -> None:
        self._set_counts("passages_by_language", counts)


def _decoded(value: str) -> dict[str, int]:
    return {str(k): int(v) for k, v in json.loads(value).items()}


class SqliteManifest(_LanguageCounts):
    """SQLite-backed: every write is a transaction, so a crash leaves the last good row."""

    def __init__(self, path: Path) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
            self._db.executescript(_SCHEMA)
            self._lock = threading.Lock()
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the manifest at {path}: {exc}") from exc

    def close(self) -> None:
        self._db.close()

    def all(self) -> dict[str, DocRecord]:
        rows = self._db.execute(f"{_SELECT} ORDER BY path").fetchall()
        return {r[0]: _record(r) for r in rows}

    def get(self, path: str) -> DocRecord | None:
        row = self._db.execute(f"{_SELECT} WHERE path = ?", (path,)).fetchone()
        return _record(row) if row else None

    def put(self, rec: DocRecord) -> None:
        self.put_many([rec])

    def put_many(self, recs: list[DocRecord]) -> None:
        """Write records in one transaction: all of them or none."""
        rows = [(r.path, *(to_fields(r)[f] for f in FIELDS)) for r in recs]
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.executemany("INSERT OR REPLACE INTO documents VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def delete(self, path: str) -> None:
        self._db.execute("DELETE FROM documents WHERE path = ?", (path,))

    def totals(self) -> dict[str, int]:
        return totals(self.all().values())

    def docs_folder(self) -> str | None:
        row = self._db.execute("SELECT value FROM index_meta WHERE key = 'docs_folder'").fetchone()
        return str(row[0]) if row else None

    def set_docs_folder(self, folder: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO index_meta VALUES ('docs_folder', ?)", (folder,))

    def _counts(self, key: str) -> dict[str, int]:
        row = self._db.execute("SELECT value FROM index_meta WHERE key = ?", (key,)).fetchone()
        return _decoded(row[0]) if row else {}

    def _set_counts(self, key: str, counts: Mapping[str, int]) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO index_meta VALUES (?, ?)", (key, json.dumps(dict(counts))))


def _record(row: tuple[Any, ...]) -> DocRecord:
    return from_fields(row[0], dict(zip(FIELDS, row[1:], strict=True)))


MANIFEST, INDEX_META = "footnote_manifest", "footnote_index_meta"  # the shared records' names


class RecordsManifest(_LanguageCounts):
    """The :class:`Manifest` in shared records (a Chroma server), so every replica reads the
    same ones. The index's own facts (the docs folder it was built from) live in a second
    set of records, apart from the documents."""

    def __init__(self, docs: SharedRecords, meta: SharedRecords) -> None:
        self._docs = docs
        self._meta = meta

    def all(self) -> dict[str, DocRecord]:
        recs = [from_fields(k, f) for k, f in self._docs.all().items()]
        return {r.path: r for r in sorted(recs, key=lambda r: r.path)}

    def get(self, path: str) -> DocRecord | None:
        f = self._docs.get(path)
        return from_fields(path, f) if f is not None else None

    def put(self, rec: DocRecord) -> None:
        self.put_many([rec])

    def put_many(self, recs: list[DocRecord]) -> None:
        self._docs.put_many({r.path: to_fields(r) for r in recs})

    def delete(self, path: str) -> None:
        self._docs.delete(path)

    def totals(self) -> dict[str, int]:
        return totals(self.all().values())

    def docs_folder(self) -> str | None:
        f = self._meta.get("docs_folder")
        return str(f["value"]) if f is not None else None

    def set_docs_folder(self, folder: str) -> None:
        self._meta.put("docs_folder", {"value": folder})

    def _counts(self, key: str) -> dict[str, int]:
        got = self._meta.get(key)
        return _decoded(str(got["value"])) if got is not None else {}

    def _set_counts(self, key: str, counts: Mapping[str, int]) -> None:
        self._meta.put(key, {"value": json.dumps(dict(counts))})
