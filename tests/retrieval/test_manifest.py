"""The manifest: SQLite on disk, the Chroma-backed one for replicas, and the in-memory fake, on one contract."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from retrieval.index import MemoryRecords
from retrieval.index.manifest import (
    FAILED,
    INDEX_META,
    INDEXED,
    MANIFEST,
    STALE,
    WRITING,
    DocRecord,
    Manifest,
    RecordsManifest,
    SqliteManifest,
    Stamps,
)
from retrieval.index.store import ChromaStore
from testkit.fakes import MemoryManifest

STAMPS = Stamps("all-MiniLM-L6-v2", 384, "p1:chunk-v1", "markdown", "1")


@pytest.fixture(params=["sqlite", "chroma", "records-in-memory", "memory"])
def manifest(request: pytest.FixtureRequest, tmp_path: Path) -> Manifest:
    if request.param == "sqlite":
        return SqliteManifest(tmp_path / "manifest.sqlite3")
    if request.param == "chroma":
        store = ChromaStore(tmp_path / "chroma")
        return RecordsManifest(store.records(MANIFEST), store.records(INDEX_META))
    if request.param == "records-in-memory":
        return RecordsManifest(MemoryRecords(), MemoryRecords())
    return MemoryManifest()


def _rec(path: str, state: str = INDEXED, chunks: int = 3, reason: str | None = None) -> DocRecord:
    return DocRecord(path, f"hash-{path}", state, reason, chunks, STAMPS if state != FAILED else None, 120, "T", 1.5)


def test_records_round_trip_exactly(manifest: Manifest) -> None:
    recs = [_rec("b.md"), _rec("a.md", FAILED, 0, "empty file"), _rec("c.md", STALE, 2, "rebuild needed: x")]
    manifest.put_many(recs)
    assert list(manifest.all()) == ["a.md", "b.md", "c.md"]
    assert manifest.get("b.md") == recs[0] and manifest.get("a.md") == recs[1] and manifest.get("nope") is None
    manifest.put(_rec("b.md", chunks=5))
    assert manifest.get("b.md").chunks == 5  # type: ignore[union-attr]
    manifest.delete("c.md")
    assert set(manifest.all()) == {"a.md", "b.md"}


def test_totals_count_states_and_only_searchable_chunks(manifest: Manifest) -> None:
    manifest.put_many([_rec("a.md"), _rec("b.md", STALE, 2), _rec("c.md", FAILED, 0), _rec("d.md", WRITING, 0)])
    assert manifest.totals() == {"documents": 4, "indexed": 1, "failed": 1, "stale": 2, "chunks": 5}


def test_the_docs_folder_is_remembered(manifest: Manifest) -> None:
    assert manifest.docs_folder() is None
    manifest.set_docs_folder("/mnt/drive")
    manifest.set_docs_folder("/mnt/drive/handbook")
    assert manifest.docs_folder() == "/mnt/drive/handbook"
    assert manifest.all() == {}  # not a document


def test_the_drive_s_languages_are_remembered_by_documents_and_by_passages(manifest: Manifest) -> None:
    assert manifest.languages() == {} and manifest.passages_by_language() == {}
    manifest.set_languages({"da": 23, "en": 1})
    manifest.set_passages_by_language({"da": 224, "en": 1})
    assert manifest.languages() == {"da": 23, "en": 1} and manifest.passages_by_language() == {"da": 224, "en": 1}
    assert manifest.all() == {}  # not documents


def test_sqlite_keeps_its_records_across_processes_and_writes_all_or_nothing(tmp_path: Path) -> None:
    path = tmp_path / "manifest.sqlite3"
    m = SqliteManifest(path)
    m.put_many([_rec("a.md")])
    m.set_docs_folder("/docs")
    bad = DocRecord("b.md", None, INDEXED, None, 1, None)  # type: ignore[arg-type] # NOT NULL hash: the row fails
    with pytest.raises(sqlite3.IntegrityError):
        m.put_many([_rec("z.md"), bad])
    m.close()
    again = SqliteManifest(path)
    assert set(again.all()) == {"a.md"} and again.docs_folder() == "/docs"


def test_a_manifest_that_cannot_be_opened_is_a_clear_error(tmp_path: Path) -> None:
    from retrieval.errors import StoreError

    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="cannot open the manifest"):
        SqliteManifest(tmp_path / "file" / "manifest.sqlite3")
