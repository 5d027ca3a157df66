"""Indexing, including bad inputs: bookkeeping on the in-memory fakes, one end-to-end test on
the real embedder and on-disk Chroma."""

from __future__ import annotations

import os
import shutil
import unicodedata
from pathlib import Path

import pytest

from retrieval.index.manifest import FAILED, INDEXED
from retrieval.ingest.sync import LONG_EMBED
from retrieval.models.embed import SentenceTransformerEmbedder
from testkit.fakes import CountingEmbedder, HashEmbedder, MemoryManifest, MemoryStore, memory_engine
from tests.conftest import EXAMPLES, make_engine


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    shutil.copytree(EXAMPLES, d)
    return d


def _agree(engine) -> None:  # type: ignore[no-untyped-def]
    """Store ids, BM25 ids and the manifest describe the same chunks."""
    stored = engine.store.count_by_path()
    recs = engine.manifest.all()
    assert stored == {p: r.chunks for p, r in recs.items() if r.state == INDEXED}
    snap = engine.searcher().snapshot
    assert snap.bm25.size == len(snap.chunks) == sum(stored.values())
    assert {c.id for c in snap.chunks} == engine.store.chunk_ids()


def test_index_then_reindex_does_no_embedding_work(docs: Path) -> None:
    counting = CountingEmbedder(HashEmbedder())
    eng = memory_engine(docs, counting)
    first = eng.sync()
    assert sorted(first.indexed) == ["expenses.md", "on-call.md", "time-off.txt"]
    assert counting.calls > 0
    _agree(eng)
    counting.calls = 0
    again = eng.sync()
    assert again.indexed == [] and again.unchanged == 3
    assert counting.calls == 0


def test_a_large_document_s_embedding_shows_its_own_bar_and_small_ones_never_do(docs: Path) -> None:
    big = "\n\n".join(f"Paragraph {i} says that rule {i} applies to team {i % 7}." for i in range(LONG_EMBED + 50))
    (docs / "big.md").write_text("# Big\n\n" + big)
    counting = CountingEmbedder(HashEmbedder())
    quiet = CountingEmbedder(HashEmbedder())
    memory_engine(docs, quiet).sync(progress=False)
    memory_engine(docs, counting).sync(progress=True)
    assert quiet.with_bar == []
    # One call is large (big.md's sentences): it alone shows a bar.
    assert len(counting.with_bar) == 1 and counting.with_bar[0] >= LONG_EMBED


def test_bad_inputs_fail_with_reasons_and_lose_nothing_else(docs: Path) -> None:
    (docs / "empty.md").write_bytes(b"")
    (docs / "junk.md").write_bytes(os.urandom(4096) + b"\x00" * 64)
    (docs / "legacy.txt").write_bytes("# Kantine\n\nMenuen: smørrebrød og crème brûlée hver fredag.".encode("latin-1"))
    (docs / "locked.md").write_text("# Secret\n\nYou cannot read me.")
    (docs / "video.mp4").write_bytes(b"\x00\x00")
    (docs / ".hidden.md").write_text("# Hidden\n\nNever indexed.")
    (docs / "~$draft.md").write_text("# Temp\n\nOffice lock file.")
    os.chmod(docs / "locked.md", 0)
    eng = memory_engine(docs)
    try:
        report = eng.sync()
    finally:
        os.chmod(docs / "locked.md", 0o644)
    recs = eng.manifest.all()
    assert recs["empty.md"].state == FAILED and "empty" in (recs["empty.md"].reason or "")
    assert recs["junk.md"].state == FAILED and "binary" in (recs["junk.md"].reason or "")
    assert recs["legacy.txt"].state == INDEXED
    if os.geteuid() != 0:  # root reads anything; the permission check only bites for a normal user
        assert recs["locked.md"].state == FAILED and "cannot read" in (recs["locked.md"].reason or "")
    assert ".hidden.md" not in recs and "~$draft.md" not in recs
    assert report.skipped == {"video.mp4": "unsupported file type"}
    for good in ("expenses.md", "on-call.md", "time-off.txt"):
        assert recs[good].state == INDEXED and recs[good].chunks > 0
    legacy = [c for c in eng.searcher().snapshot.chunks if c.path == "legacy.txt"]
    assert any("smørrebrød" in c.content for c in legacy)
    _agree(eng)


def test_unreadable_file_fails_without_stopping_others(docs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = os.open

    def deny(path: str | os.PathLike[str], flags: int, *args: int) -> int:
        # The indexer opens each file itself (without blocking): refused as for a file we may not read.
        if Path(path).name == "on-call.md":
            raise PermissionError(13, "Permission denied")
        return original(path, flags, *args)

    monkeypatch.setattr(os, "open", deny)
    eng = memory_engine(docs)
    eng.sync()
    recs = eng.manifest.all()
    assert recs["on-call.md"].state == FAILED and recs["on-call.md"].reason == "cannot read the file: Permission denied"
    assert recs["expenses.md"].state == INDEXED
    monkeypatch.undo()
    eng.sync()  # failed documents are retried on the next sync
    assert eng.manifest.get("on-call.md").state == INDEXED  # type: ignore[union-attr]


def test_edit_delete_and_oversize(embedder: SentenceTransformerEmbedder, docs: Path, tmp_path: Path) -> None:
    eng = make_engine(embedder, tmp_path / "data", docs, max_file_bytes=5_000)
    eng.sync()
    (docs / "expenses.md").write_text("# Expenses\n\n## Claims\nClaims are now filed in the Tally app.\n")
    (docs / "time-off.txt").unlink()
    (docs / "big.md").write_text("# Big\n\n" + "word " * 2000)
    report = eng.sync()
    assert report.indexed == ["expenses.md"] and report.removed == ["time-off.txt"]
    recs = eng.manifest.all()
    assert "time-off.txt" not in recs
    assert recs["big.md"].state == FAILED and "too large" in (recs["big.md"].reason or "")
    hits = eng.searcher().search("Which app are claims filed in?", k=3).hits
    assert hits[0].chunk.path == "expenses.md" and "Tally" in hits[0].chunk.content
    assert all(h.chunk.path != "time-off.txt" for h in eng.searcher().search("parental leave weeks").hits)
    _agree(eng)


def test_missing_docs_folder_is_a_clear_error(tmp_path: Path) -> None:
    from retrieval.errors import StoreError

    eng = memory_engine(tmp_path / "nope")
    with pytest.raises(StoreError, match="docs folder not found"):
        eng.sync()


def test_empty_folder_gives_an_empty_searchable_index(tmp_path: Path) -> None:
    (tmp_path / "empty-docs").mkdir()
    eng = memory_engine(tmp_path / "empty-docs")
    eng.sync()
    res = eng.searcher().search("anything at all")
    assert res.hits == [] and eng.searcher().snapshot.vectors.shape[0] == 0


def test_a_folder_emptied_under_an_index_removes_nothing_unless_allowed(docs: Path, tmp_path: Path) -> None:
    from retrieval.errors import StoreError

    eng = memory_engine(docs)
    eng.sync()
    away = tmp_path / "away"
    shutil.move(str(docs), away)
    docs.mkdir()  # a shared drive that is not mounted: its mount point, empty
    with pytest.raises(StoreError, match=r"empty, yet the index holds 3 documents.*is the drive mounted"):
        eng.sync()
    assert sorted(eng.manifest.all()) == ["expenses.md", "on-call.md", "time-off.txt"]
    assert eng.searcher().search("acknowledge a SEV1 page").hits  # still answering
    docs.rmdir()
    shutil.move(str(away), docs)
    assert eng.sync().unchanged == 3  # back: nothing to do again
    for f in docs.iterdir():
        f.unlink()
    report = eng.sync(allow_empty=True)  # emptied on purpose
    assert sorted(report.removed) == ["expenses.md", "on-call.md", "time-off.txt"] and eng.manifest.all() == {}


def test_a_folder_that_cannot_be_listed_keeps_its_documents(docs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (docs / "team").mkdir()
    (docs / "team" / "rota.md").write_text("# Rota\n\nThe rota changes every Monday at noon.\n")
    eng = memory_engine(docs)
    eng.sync()
    original = os.scandir

    def deny(path: str | os.PathLike[str] = ".") -> object:
        # A network drive's folder that fails to list (EIO), or one we may not read: os.walk passes over it.
        if Path(path).name == "team":
            raise OSError(5, "Input/output error", str(path))
        return original(path)

    monkeypatch.setattr(os, "scandir", deny)
    report = eng.sync()
    assert report.removed == [] and "team/rota.md" in eng.manifest.all()
    assert report.skipped["team"].startswith("cannot list this folder (Input/output error)")
    monkeypatch.undo()
    shutil.rmtree(docs / "team")
    assert eng.sync().removed == ["team/rota.md"]  # listed again: really gone


def test_a_sync_that_finds_the_disk_full_says_so_in_one_line(docs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from retrieval.errors import StoreError, no_space

    eng = memory_engine(docs)

    def full(**kwargs: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(eng.indexer, "sync", full)
    with pytest.raises(StoreError, match=r"^no space left on the disk .*database or disk is full"):
        eng.sync()
    assert eng.last_sync is not None and (eng.last_sync.error or "").startswith("no space left")  # status shows it

    def said(**kwargs: object) -> None:  # the store said it already
        raise no_space(sqlite3.OperationalError("database or disk is full"))

    monkeypatch.setattr(eng.indexer, "sync", said)
    with pytest.raises(StoreError) as once:
        eng.sync()
    assert str(once.value).count("no space left") == 1


def test_an_ignored_folder_is_named_as_a_person_would_and_its_documents_leave(docs: Path) -> None:
    for rel in ("archive/old.md", "archive/2019/older.md", "team/archive/kept.md"):
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_text(f"# {rel}\n\nThe rota changes every Monday at noon.\n")
    store, manifest = MemoryStore(), MemoryManifest()
    assert "archive/old.md" in memory_engine(docs, store=store, manifest=manifest).sync().indexed
    report = memory_engine(docs, store=store, manifest=manifest, ignore=("archive/",)).sync()
    assert sorted(report.removed) == ["archive/2019/older.md", "archive/old.md"]  # ignored now: they leave
    for ignore in (("archive",), ("archive/",), ("archive/*",)):
        indexed = set(memory_engine(docs, ignore=ignore).sync().indexed)
        assert not {"archive/old.md", "archive/2019/older.md"} & indexed, ignore
        assert "team/archive/kept.md" in indexed  # a folder's glob names it from the top, as a path


def test_an_ignore_glob_typed_with_a_letter_matches_a_mac_s_decomposed_name(docs: Path) -> None:
    # macOS writes "Å" as "A" + a combining ring (NFD); the setting was typed with "Å".
    for rel in ("Årsrapporter/2019.md", "Notes/kladde-år.md"):
        path = docs / unicodedata.normalize("NFD", rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("# Old\n\nThe rota changes every Monday at noon.\n")
    indexed = {
        unicodedata.normalize("NFC", p) for p in memory_engine(docs, ignore=("Årsrapporter/", "*år.md")).sync().indexed
    }
    assert not {"Årsrapporter/2019.md", "Notes/kladde-år.md"} & indexed and indexed


def test_a_sync_reads_only_what_changed_since_this_process_read_it(docs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    original = os.open

    def counted(path: str | os.PathLike[str], flags: int, *args: int) -> int:
        if Path(path).is_relative_to(docs):
            opened.append(Path(path).name)
        return original(path, flags, *args)

    monkeypatch.setattr(os, "open", counted)
    eng = memory_engine(docs)
    eng.sync()
    assert sorted(opened) == ["expenses.md", "on-call.md", "time-off.txt"]
    opened.clear()
    assert eng.sync().unchanged == 3 and opened == []  # a drive's unchanged files are not read again
    on_call = docs / "on-call.md"
    before = on_call.stat()
    text = on_call.read_text()
    on_call.write_text(text.replace("5 minutes", "9 minutes"))  # the same size ...
    os.utime(on_call, ns=(before.st_atime_ns, before.st_mtime_ns))  # ... and mtime, as `cp -p` leaves it
    report = eng.sync()
    assert report.indexed == ["on-call.md"] and opened == ["on-call.md"]  # its ctime moved: read again
    assert "9 minutes" in eng.searcher().search("acknowledge a SEV1 page").hits[0].chunk.content
    opened.clear()
    assert memory_engine(docs, store=eng.store, manifest=eng.manifest).sync().unchanged == 3  # type: ignore[arg-type]
    assert len(opened) == 3  # a new process reads each file once, to know it


def test_snapshot_leaves_out_documents_it_may_not_search(docs: Path) -> None:
    from retrieval.index.snapshot import Snapshot

    eng = memory_engine(docs)
    eng.sync()
    snap = Snapshot.build(eng.store.load(), eng.embedder.name, keep=lambda p: p != "on-call.md")
    assert snap.chunks and all(c.path != "on-call.md" for c in snap.chunks)
    assert snap.vectors.shape[0] == len(snap.chunks) == snap.bm25.size
    assert set(snap.sentence_owner.tolist()) == set(range(len(snap.chunks)))
    assert len(snap.sentence_owner) == len(snap.sentence_vectors)
