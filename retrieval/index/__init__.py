"""The index: what a sync stored and what search reads.

Chroma holds the vectors (``store``: the only module that imports chromadb); the
manifest records each document's state, reason, chunk count and stamps; the lease lets
one process sync at a time; shared records (put-if-absent, get, delete-older-than) serve
the lease, the manifest and Slack's claims across replicas; BM25 and the
:class:`Snapshot` are the in-memory view every question is ranked against.
"""

from __future__ import annotations

from retrieval.index.bm25 import DANISH_STOPWORDS, STOPWORDS, Bm25Index, snowball, tokenize
from retrieval.index.lease import FileLease, Lease, SharedLease
from retrieval.index.manifest import (
    FAILED,
    INDEXED,
    STALE,
    WRITING,
    DocRecord,
    Manifest,
    RecordsManifest,
    SqliteManifest,
    Stamps,
    totals,
)
from retrieval.index.records import Fields, MemoryRecords, Scalar, SharedRecords, SqliteRecords
from retrieval.index.snapshot import Snapshot
from retrieval.index.storage import RECORDS, Storage, open_storage
from retrieval.index.store import ChromaStore, StoredIndex, VectorStore

__all__ = [
    "DANISH_STOPWORDS",
    "FAILED",
    "INDEXED",
    "RECORDS",
    "STALE",
    "STOPWORDS",
    "WRITING",
    "Bm25Index",
    "ChromaStore",
    "DocRecord",
    "Fields",
    "FileLease",
    "Lease",
    "Manifest",
    "MemoryRecords",
    "RecordsManifest",
    "Scalar",
    "SharedLease",
    "SharedRecords",
    "Snapshot",
    "SqliteManifest",
    "SqliteRecords",
    "Stamps",
    "Storage",
    "StoredIndex",
    "VectorStore",
    "open_storage",
    "snowball",
    "tokenize",
    "totals",
]
