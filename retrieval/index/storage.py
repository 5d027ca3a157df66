"""Where one index lives: its vectors, its document records, its sync lease and shared records.

On one machine: Chroma on disk, SQLite and a file lease in the data dir. With a Chroma
server (``FOOTNOTE_CHROMA_URL``): all of them in the server, shared by every replica.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from retrieval.index.lease import LOCKS, FileLease, Lease, SharedLease
from retrieval.index.manifest import INDEX_META, MANIFEST, Manifest, RecordsManifest, SqliteManifest
from retrieval.index.records import MemoryRecords, SharedRecords, SqliteRecords
from retrieval.index.store import ChromaStore

RECORDS = "records.sqlite3"


@dataclass(frozen=True)
class Storage:
    store: ChromaStore
    manifest: Manifest
    lease: Lease
    data_dir: Path | None = None  # where kept records live when the index is not shared

    def records(self, name: str) -> SharedRecords:
        """Records every replica shares (named, e.g. Slack's claims); in one process's memory
        when the index is not shared, since then no other replica could read them."""
        return self.store.records(name) if self.store.shared else MemoryRecords()

    def kept_records(self, name: str) -> SharedRecords:
        """Records that outlive the process: every replica's (in the Chroma server) when the
        index is shared, else a SQLite file in the data dir (every process on it sees them)."""
        if self.store.shared:
            return self.store.records(name)
        if self.data_dir is None:
            return MemoryRecords()
        return SqliteRecords(self.data_dir / RECORDS, name)


def open_storage(data_dir: Path, chroma_url: str | None, owner: str) -> Storage:
    """On-disk Chroma + SQLite + a file lease, or, with a server URL, all three shared by
    every replica (``owner`` names this one in the shared lease)."""
    store = ChromaStore(data_dir / "chroma", url=chroma_url)
    if store.shared:
        manifest = RecordsManifest(store.records(MANIFEST), store.records(INDEX_META))
        return Storage(store, manifest, SharedLease(store.records(LOCKS), owner))
    return Storage(store, SqliteManifest(data_dir / "manifest.sqlite3"), FileLease(data_dir), data_dir)
