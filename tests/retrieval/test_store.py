"""The vector store: real on-disk Chroma, and the in-memory fake held to the same behaviour."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval.index.store import ChromaStore, VectorStore
from retrieval.types import Chunk
from testkit.fakes import HashEmbedder, MemoryStore

EMB = HashEmbedder()


def _chunks(path: str, n: int) -> list[Chunk]:
    return [
        Chunk(f"{path}#{i}", path, path, "S", i, f"[{path}] text {i}", f"text {i}", i * 10, i * 10 + 6)
        for i in range(n)
    ]


def _add(store: VectorStore, path: str, n: int) -> list[Chunk]:
    chunks = _chunks(path, n)
    sentences = [[f"{c.content} first.", f"{c.content} second."] for c in chunks]
    store.add(chunks, EMB.embed([c.text for c in chunks]), sentences, [EMB.embed(s) for s in sentences])
    return chunks


@pytest.fixture(params=["chroma", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> VectorStore:
    return ChromaStore(tmp_path / "chroma") if request.param == "chroma" else MemoryStore()


def test_add_count_load_and_delete(store: VectorStore) -> None:
    b = _add(store, "b.md", 3)
    a = _add(store, "a.md", 2)
    assert store.count_by_path() == {"a.md": 2, "b.md": 3}
    assert store.count_by_path(["b.md", "zzz.md"]) == {"b.md": 3} and store.count_by_path([]) == {}
    assert store.chunk_ids("a.md") == {c.id for c in a} and len(store.chunk_ids()) == 5
    loaded = store.load()
    assert [c.id for c in loaded.chunks] == [c.id for c in a + b]  # by document, then position
    assert loaded.chunks[0] == a[0]  # every field survives the round trip
    np.testing.assert_allclose(loaded.vectors, EMB.embed([c.text for c in a + b]), atol=1e-6)
    assert len(loaded.sentence_vectors) == len(loaded.sentence_owner) == 10
    assert sorted(loaded.sentence_owner.tolist()) == sorted(list(range(5)) * 2)
    store.delete_paths(["b.md"])
    assert store.count_by_path() == {"a.md": 2} and len(store.load().sentence_owner) == 4


def test_vectors_for_returns_stored_vectors_keyed_by_their_text(store: VectorStore) -> None:
    a = _add(store, "a.md", 2)
    _add(store, "b.md", 1)
    chunks, sents = store.vectors_for(["a.md"])
    assert set(chunks) == {c.text for c in a}
    np.testing.assert_allclose(chunks[a[1].text], EMB.embed([a[1].text])[0], atol=1e-6)
    assert set(sents) == {"text 0 first.", "text 0 second.", "text 1 first.", "text 1 second."}
    assert store.vectors_for([]) == ({}, {})


def test_add_never_overwrites_an_existing_id(store: VectorStore) -> None:
    (first,) = _add(store, "a.md", 1)
    clash = Chunk(first.id, "a.md", "A", "S", 0, "other text", "other", 0, 5)
    store.add([clash], EMB.embed(["other text"]), [[]], [np.zeros((0, EMB.dimension), np.float32)])
    assert store.load().chunks == [first]


def test_an_empty_store_loads_empty(store: VectorStore) -> None:
    loaded = store.load()
    assert loaded.chunks == [] and loaded.vectors.shape[0] == 0 and len(loaded.sentence_owner) == 0
    assert not store.shared


def test_a_store_that_cannot_be_opened_is_a_clear_error(tmp_path: Path) -> None:
    from retrieval.errors import StoreError

    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreError, match="cannot open the vector store"):
        ChromaStore(blocker / "chroma")


def test_a_drive_of_more_sentences_or_paths_than_sqlite_has_variables_works_whole(tmp_path: Path) -> None:
    """Chroma reads a get's records with one SQLite statement of a variable each, and SQLite
    allows 32,766: a drive with more sentences (a 100,000-row ledger export) could be indexed
    but never loaded, and every search failed with "too many SQL variables"."""
    store = ChromaStore(tmp_path / "chroma")
    n_chunks, per_chunk = 330, 100  # 33,000 sentences; vectors of 4 numbers keep it quick
    chunks = _chunks("ledger.csv", n_chunks)
    sentences = [[f"row {i}.{k}" for k in range(per_chunk)] for i in range(n_chunks)]
    rng = np.random.default_rng(0)
    vectors = rng.random((n_chunks, 4), dtype=np.float32)
    sentence_vectors = [rng.random((per_chunk, 4), dtype=np.float32) for _ in range(n_chunks)]
    store.add(chunks, vectors, sentences, sentence_vectors)
    loaded = store.load()
    assert len(loaded.chunks) == n_chunks and len(loaded.sentence_vectors) == n_chunks * per_chunk
    np.testing.assert_allclose(loaded.sentence_vectors, np.concatenate(sentence_vectors), atol=1e-6)  # in order
    chunk_vecs, sentence_vecs = store.vectors_for(["ledger.csv"])
    assert len(chunk_vecs) == n_chunks and len(sentence_vecs) == n_chunks * per_chunk
    assert store.count_by_path() == {"ledger.csv": n_chunks}
    # A sync that finds a removed folder of 40,000 files names them all in one call.
    many = [f"archive/{i}.md" for i in range(40_000)] + ["ledger.csv"]
    assert store.count_by_path(many) == {"ledger.csv": n_chunks}
    assert [len(v) for v in store.vectors_for(many)] == [n_chunks, n_chunks * per_chunk]
    store.delete_paths(many)
    assert store.count_by_path() == {} and len(store.load().sentence_vectors) == 0


def test_a_write_that_finds_the_disk_full_is_one_line_that_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    from collections import namedtuple

    from retrieval.errors import StoreError

    store = ChromaStore(tmp_path / "chroma")
    _add(store, "a.md", 2)

    def compaction(*args: object, **kwargs: object) -> None:
        # What chromadb raised on a full tmpfs (measured): its message does not say why.
        raise RuntimeError("Error in compaction: Failed to apply logs to the metadata segment")

    monkeypatch.setattr(store._chunks._c, "add", compaction)  # type: ignore[attr-defined]
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**10, 10**10 - 2**20, 2**20))
    with pytest.raises(StoreError, match=r"^no space left on the disk .*Error in compaction"):
        _add(store, "b.md", 2)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**10, 10**9, 9 * 10**9))
    with pytest.raises(RuntimeError, match="Error in compaction"):  # room enough: a defect, raised as it is
        _add(store, "b.md", 2)
    assert store.count_by_path() == {"a.md": 2}
