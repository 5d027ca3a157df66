"""The engine on in-memory collaborators: syncs, the searcher's life, the lease, the docs folder.

Everything here is bookkeeping, so the store, manifest, lease, embedder and clock
are the fakes of ``tests/fakes.py``; nothing touches Chroma or a model.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import threading
from pathlib import Path

import numpy as np
import pytest

from retrieval.errors import StoreError, SyncBusy
from retrieval.index.manifest import INDEXED, STALE, WRITING, DocRecord
from retrieval.ingest.sync import SyncReport
from retrieval.search.engine import FolderMismatch
from testkit.fakes import FakeClock, MemoryLease, MemoryManifest, MemoryStore, memory_engine
from tests.conftest import EXAMPLES


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    shutil.copytree(EXAMPLES, d)
    return d


def test_a_sync_indexes_the_folder_and_the_searcher_sees_it(docs: Path) -> None:
    eng = memory_engine(docs)
    report = eng.sync()
    assert sorted(report.indexed) == ["expenses.md", "on-call.md", "time-off.txt"]
    assert {r.state for r in eng.manifest.all().values()} == {INDEXED}
    snap = eng.searcher().snapshot
    assert {c.path for c in snap.chunks} == set(report.indexed)
    assert len(snap.chunks) == sum(r.chunks for r in eng.manifest.all().values())
    assert eng.last_sync is not None and eng.last_sync.error is None


def test_a_busy_lease_refuses_the_sync_and_writes_nothing(docs: Path) -> None:
    lease = MemoryLease(held=True)  # another process is syncing
    eng = memory_engine(docs, lease=lease)
    with pytest.raises(SyncBusy):
        eng.sync()
    assert eng.manifest.all() == {} and eng.store.count_by_path() == {}
    assert lease.held  # the other holder keeps it
    lease.release()
    eng.sync()
    assert not lease.held and lease.gen == 1


def test_a_second_process_picks_up_a_sync_after_its_refresh_interval(docs: Path) -> None:
    store, manifest, lease, clock = MemoryStore(), MemoryManifest(), MemoryLease(), FakeClock()
    a = memory_engine(docs, store=store, manifest=manifest, lease=lease, refresh_s=5.0)
    b = memory_engine(docs, store=store, manifest=manifest, lease=lease, clock=clock, refresh_s=5.0)
    a.sync()
    before = b.searcher()
    (docs / "parking.md").write_text("# Parking\n\nThe garage has twelve spaces for bicycles.\n")
    a.sync()
    clock.advance(4.9)
    assert b.searcher() is before  # not yet looked
    clock.advance(0.2)
    after = b.searcher()
    assert after is not before and "parking.md" in {c.path for c in after.snapshot.chunks}
    clock.advance(10)
    assert b.searcher() is after  # the generation did not change: no rebuild


def test_concurrent_callers_share_one_searcher(docs: Path) -> None:
    eng = memory_engine(docs)
    eng.sync()
    builds = []
    original = eng._build

    def counted():  # type: ignore[no-untyped-def]
        builds.append(1)
        return original()

    eng._build = counted  # type: ignore[method-assign]
    start = threading.Barrier(8)
    got = []

    def ask() -> None:
        start.wait(10)
        got.append(eng.searcher())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(got) == 8 and len({id(s) for s in got}) == 1 and len(builds) == 1


def test_the_index_refuses_another_folder_until_told_to_rebuild_from_it(docs: Path, tmp_path: Path) -> None:
    store, manifest = MemoryStore(), MemoryManifest()
    memory_engine(docs, store=store, manifest=manifest).sync()
    assert manifest.folder == str(docs.resolve())
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.md").write_text("# A\n\nSomething else entirely.\n")
    wrong = memory_engine(other, store=store, manifest=manifest)
    before = (manifest.all(), store.chunk_ids())
    with pytest.raises(FolderMismatch, match="--reindex-from"):
        wrong.sync()
    assert (manifest.all(), store.chunk_ids()) == before  # intact
    wrong.adopt_folder()
    report = wrong.sync()
    assert report.indexed == ["a.md"] and sorted(report.removed) == ["expenses.md", "on-call.md", "time-off.txt"]
    assert set(manifest.all()) == {"a.md"} and manifest.folder == str(other.resolve())


def test_adopting_a_missing_folder_is_refused(tmp_path: Path) -> None:
    eng = memory_engine(tmp_path / "nope")
    with pytest.raises(StoreError, match="docs folder not found"):
        eng.adopt_folder()
    assert eng.manifest.docs_folder() is None


def test_a_symlink_out_of_the_folder_is_skipped_with_its_reason(docs: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("# Salaries\n\nThe CEO earns forty million.\n")
    (docs / "leak.md").symlink_to(secret)
    (docs / "inside.md").symlink_to(docs / "on-call.md")  # a link that stays inside is fine
    eng = memory_engine(docs)
    report = eng.sync()
    assert set(report.skipped) == {"leak.md"} and "outside the docs folder" in report.skipped["leak.md"]
    assert "leak.md" not in eng.manifest.all() and "inside.md" in report.indexed
    assert all("forty million" not in c.content for c in eng.searcher().snapshot.chunks)
    assert eng.indexer.survey()[0] == report.skipped


def test_a_broken_symlink_inside_the_folder_fails_saying_so_and_the_rest_is_indexed(docs: Path) -> None:
    (docs / "moved.md").symlink_to("archive/moved.md")  # inside the folder, its target gone
    report = memory_engine(docs).sync()
    assert report.failed == {"moved.md": "a broken symlink: its target archive/moved.md does not exist"}
    assert sorted(report.indexed) == ["expenses.md", "on-call.md", "time-off.txt"]


def test_a_symlink_loop_fails_saying_so_and_the_rest_is_indexed(docs: Path) -> None:
    (docs / "a.md").symlink_to("b.md")
    (docs / "b.md").symlink_to("a.md")  # resolving either raises instead of leading anywhere
    report = memory_engine(docs).sync()
    loop = "a symlink loop: its links lead back to each other and never to a file"
    assert report.failed == {"a.md": loop, "b.md": loop}
    assert sorted(report.indexed) == ["expenses.md", "on-call.md", "time-off.txt"]


def test_a_name_that_is_not_utf8_is_skipped_shown_by_its_bytes_and_the_rest_is_indexed(docs: Path) -> None:
    with open(os.path.join(os.fsencode(docs), b"caf\xe9.md"), "wb") as f:  # a Latin-1 name
        f.write(b"# Cafe\n\nThe cafe opens at eight.\n")
    eng = memory_engine(docs)
    report = eng.sync()
    assert report.skipped == {
        "caf\\xe9.md": "its name is not valid UTF-8 (a drive in another encoding?): rename it to index it"
    }
    assert sorted(report.indexed) == ["expenses.md", "on-call.md", "time-off.txt"]
    assert eng.indexer.survey()[0] == report.skipped


def test_a_title_from_a_name_with_a_newline_is_one_line(docs: Path) -> None:
    (docs / "parking\nrules.txt").write_text("Parking spots are assigned each January.\n")
    eng = memory_engine(docs)
    assert "parking\nrules.txt" in eng.sync().indexed  # the file keeps its real name
    titles = {c.doc_title for c in eng.searcher().snapshot.chunks if c.path == "parking\nrules.txt"}
    assert titles == {"parking rules"}


def test_fifos_sockets_and_a_folder_linked_from_outside_are_skipped_never_opened(
    docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "payroll"
    outside.mkdir()
    (outside / "salaries.md").write_text("# Salaries\n\nThe CEO earns forty million.\n")
    (docs / "payroll").symlink_to(outside, target_is_directory=True)
    (docs / "team").mkdir()
    (docs / "team" / "handbook").symlink_to(docs, target_is_directory=True)  # stays inside: not listed
    fifo = docs / "minutes.md"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    monkeypatch.chdir(docs)  # a socket's path is limited to ~100 bytes: bind it by a short relative one
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind("notes.txt")
    eng = memory_engine(docs)
    reports: list[object] = []
    t = threading.Thread(target=lambda: reports.append(eng.sync()), daemon=True)
    t.start()
    t.join(30)
    if t.is_alive():  # the sync is stuck opening the FIFO: give it a writer, so it ends, and fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        t.join(30)
        pytest.fail("the sync blocked on a named pipe")
    sock.close()
    (report,) = reports
    assert isinstance(report, SyncReport)
    assert set(report.skipped) == {"payroll", "minutes.md", "notes.txt"}, report.skipped
    assert "outside the docs folder" in report.skipped["payroll"] and "folder" in report.skipped["payroll"]
    assert report.skipped["minutes.md"].startswith("a named pipe (FIFO), not a regular file")
    assert report.skipped["notes.txt"].startswith("a socket, not a regular file")
    assert report.failed == {} and sorted(report.indexed) == ["expenses.md", "on-call.md", "time-off.txt"]
    assert all("forty million" not in c.content for c in eng.searcher().snapshot.chunks)
    assert eng.indexer.survey()[0] == report.skipped  # `footnote status` lists them too


def test_a_file_swapped_for_a_fifo_after_the_walk_is_not_waited_on(docs: Path) -> None:
    from retrieval.ingest.sync import SourceFile

    fifo = docs / "late.md"
    os.mkfifo(fifo)
    eng = memory_engine(docs)
    got: list[tuple[bytes | None, str | None, tuple[int, ...] | None]] = []
    t = threading.Thread(target=lambda: got.append(eng.indexer._read(SourceFile("late.md", fifo))), daemon=True)
    t.start()
    t.join(30)
    if t.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        t.join(30)
        pytest.fail("reading a FIFO blocked")
    assert got == [(None, "not a regular file: not read", None)]


def test_a_crash_while_writing_is_rebuilt_by_the_next_sync(docs: Path) -> None:
    eng = memory_engine(docs)
    eng.sync()
    rec = eng.manifest.get("on-call.md")
    assert rec is not None
    # As a process killed mid-write leaves it: the record says "writing", the store holds part of the chunks.
    eng.manifest.put(dataclasses.replace(rec, state=WRITING, chunks=0))
    partial = {i: eng.store.chunks[i] for i in sorted(eng.store.chunk_ids("on-call.md"))[:1]}
    eng.store.delete_paths(["on-call.md"])
    eng.store.chunks.update(partial)
    assert eng.store.count_by_path(["on-call.md"]) == {"on-call.md": 1}
    assert "on-call.md" not in {c.path for c in eng.searcher().snapshot.chunks}  # never searched half-written
    assert eng.manifest.totals()["stale"] == 1  # waiting for a rebuild
    report = eng.sync()
    assert report.indexed == ["on-call.md"]
    again = eng.manifest.get("on-call.md")
    assert again is not None and again.state == INDEXED and again.chunks == rec.chunks


def test_records_show_what_would_be_stale_without_writing(docs: Path) -> None:
    from retrieval.ingest.chunk import ChunkerConfig

    store, manifest = MemoryStore(), MemoryManifest()
    memory_engine(docs, store=store, manifest=manifest).sync()
    eng = memory_engine(docs, store=store, manifest=manifest)
    eng.indexer.chunker = ChunkerConfig(target=300)
    writes, stored = manifest.writes, manifest.all()
    recs = eng.records()
    assert {r.state for r in recs.values()} == {STALE} and "t300" in (recs["on-call.md"].reason or "")
    assert manifest.writes == writes and manifest.all() == stored
    assert sorted(eng.mark_stale()) == sorted(recs) and manifest.writes == writes + 1


def test_a_snapshot_is_immutable(docs: Path) -> None:
    eng = memory_engine(docs)
    eng.sync()
    snap = eng.searcher().snapshot
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.chunks = []  # type: ignore[misc]
    with pytest.raises(ValueError, match="read-only"):
        snap.vectors[0, 0] = 1.0
    mask = snap.within(["hr"])
    assert mask is not None and not mask.flags.writeable and snap.within(["hr"]) is mask


def test_a_scoped_search_only_sees_its_folders(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    for folder, name in (("engineering", "on-call.md"), ("hr", "time-off.txt")):
        (docs / folder).mkdir(parents=True)
        shutil.copy(EXAMPLES / name, docs / folder / name)
    eng = memory_engine(docs)
    eng.sync()
    s = eng.searcher()
    everything = s.search("parental leave weeks", k=50)
    scoped = s.search("parental leave weeks", k=50, folders=["engineering"])
    assert scoped.hits and all(h.chunk.path.startswith("engineering/") for h in scoped.hits)
    allowed = np.array([c.path.startswith("engineering/") for c in s.snapshot.chunks])
    q = eng.embedder.embed(["parental leave weeks"])[0]
    assert scoped.best_distance == pytest.approx(1.0 - float((s.snapshot.vectors[allowed] @ q).max()), abs=1e-6)
    assert scoped.best_distance >= everything.best_distance
    # The gate's nearest sentence is also only looked for inside the folders.
    snap = s.snapshot
    inside = allowed[snap.sentence_owner]
    nearest = 1.0 - float((snap.sentence_vectors[inside] @ q).max())
    assert scoped.best_sentence_distance == pytest.approx(nearest, abs=1e-6)
    assert everything.best_sentence_distance is not None
    assert everything.best_sentence_distance <= scoped.best_sentence_distance
    assert s.search("parental leave", folders=["nowhere"]).hits == []


def test_the_nearest_sentence_skips_chunks_without_sentences_and_honours_folders() -> None:
    from retrieval.index.snapshot import Snapshot
    from retrieval.index.store import StoredIndex
    from retrieval.types import Chunk

    chunks = [Chunk(f"c{i}", p, "T", "S", i, "t", "t", 0, 1) for i, p in enumerate(["a/x.md", "a/x.md", "b/y.md"])]
    sentence_vectors = np.asarray([[0.6, 0.8], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    # Owners out of order (a store may return them so); chunk 2 has no sentence at all.
    snap = Snapshot.build(
        StoredIndex(chunks, np.eye(3, 2, dtype=np.float32), sentence_vectors, np.asarray([1, 0, 1])), "m"
    )
    q = np.asarray([1.0, 0.0], dtype=np.float32)
    best = snap.best_sentence(q)
    assert best.tolist() == pytest.approx([1.0, 0.6, -1.0])
    assert snap.has_sentences.tolist() == [True, True, False]
    assert snap.nearest_sentence_distance(best, None) == pytest.approx(0.0)
    only_b = np.asarray([False, False, True])
    assert snap.nearest_sentence_distance(best, only_b) is None  # the gate then reads the chunk distance
    assert snap.nearest_sentence_distance(best, np.asarray([False, True, True])) == pytest.approx(0.4)


def test_an_index_without_sentence_vectors_has_no_sentence_distance(docs: Path) -> None:
    from retrieval.evaluation.suite import load_documents, memory_snapshot
    from retrieval.ingest.chunk import ChunkerConfig
    from retrieval.search.searcher import SearchConfig, Searcher

    eng = memory_engine(docs)
    snap = memory_snapshot(load_documents(docs, 10_000_000), ChunkerConfig(), eng.embedder)
    result = Searcher(snap, eng.embedder, SearchConfig(fusion="dense")).search("who approves expenses")
    assert result.hits and result.best_sentence_distance is None


def test_a_search_told_not_to_scan_sentences_reports_none(docs: Path) -> None:
    from retrieval.search.searcher import SearchConfig, Searcher

    eng = memory_engine(docs)
    eng.sync()
    snap = eng.searcher().snapshot
    assert len(snap.sentence_owner)
    scanned = Searcher(snap, eng.embedder, SearchConfig(fusion="dense")).search("who approves expenses")
    skipped = Searcher(snap, eng.embedder, SearchConfig(fusion="dense", nearest_sentence=False))
    assert scanned.best_sentence_distance is not None
    assert skipped.search("who approves expenses").best_sentence_distance is None
    reranked = Searcher(snap, eng.embedder, SearchConfig(nearest_sentence=False), eng.searcher().reranker)
    assert reranked.search("who approves expenses").best_sentence_distance is not None  # the reranker scans anyway


def test_a_failed_sync_is_recorded_and_the_old_searcher_keeps_answering(docs: Path) -> None:
    eng = memory_engine(docs)
    eng.sync()
    old = eng.searcher()
    shutil.rmtree(docs)  # the drive was unmounted
    with pytest.raises(StoreError):
        eng.sync()
    assert eng.last_sync is not None and "docs folder not found" in (eng.last_sync.error or "")
    assert eng.searcher() is old


def test_record_with_negative_chunks_from_an_old_index_reads_as_writing() -> None:
    from retrieval.index.manifest import from_fields, to_fields

    legacy = to_fields(DocRecord("a.md", "h", STALE, "indexing did not finish", 0, None))
    legacy["chunks"] = -1
    rec = from_fields("a.md", legacy)
    assert rec.state == WRITING and rec.chunks == 0
