"""The sync lifecycle: renames, edits, stamps and staleness, crashes, and queries during a sync."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from retrieval.index.manifest import INDEXED, STALE
from retrieval.ingest.chunk import ChunkerConfig
from retrieval.models.embed import SentenceTransformerEmbedder
from retrieval.search.engine import Engine
from testkit.fakes import CountingEmbedder, GatedEmbedder, RenamedEmbedder
from tests.conftest import EXAMPLES, ROOT, make_engine
from tests.retrieval.test_indexer import _agree


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    shutil.copytree(EXAMPLES, d)
    return d


def test_rename_moves_vectors_without_embedding_and_keeps_one_copy(
    embedder: SentenceTransformerEmbedder, docs: Path, tmp_path: Path
) -> None:
    counting = CountingEmbedder(embedder)
    eng = make_engine(counting, tmp_path / "data", docs)
    eng.sync()
    before = eng.manifest.get("on-call.md")
    (docs / "handbooks").mkdir()
    (docs / "on-call.md").rename(docs / "handbooks" / "on-call-2026.md")
    counting.calls = 0
    report = eng.sync()
    assert report.renamed == {"on-call.md": "handbooks/on-call-2026.md"}
    assert report.removed == [] and report.chunks_embedded == 0 and counting.calls == 0
    recs = eng.manifest.all()
    assert "on-call.md" not in recs
    moved = recs["handbooks/on-call-2026.md"]
    assert moved.state == INDEXED and before is not None and moved.chunks == before.chunks
    assert set(eng.store.count_by_path()) == {"expenses.md", "handbooks/on-call-2026.md", "time-off.txt"}
    hit = eng.searcher().search("How fast must a SEV1 page be acknowledged?", k=1).hits[0]
    assert hit.chunk.path == "handbooks/on-call-2026.md"
    _agree(eng)


def test_a_one_paragraph_edit_embeds_only_what_changed(
    embedder: SentenceTransformerEmbedder, docs: Path, tmp_path: Path
) -> None:
    counting = CountingEmbedder(embedder)
    eng = make_engine(counting, tmp_path / "data", docs)
    eng.sync()
    path = docs / "on-call.md"
    path.write_text(path.read_text() + "\nPagers are tested every first Monday of the month.\n")
    report = eng.sync()
    assert report.indexed == ["on-call.md"]
    assert report.chunks_embedded == 1 and report.chunks_reused == eng.manifest.get("on-call.md").chunks - 1  # type: ignore[union-attr]
    assert "first Monday" in eng.searcher().search("When are pagers tested?", k=1).hits[0].chunk.content
    _agree(eng)


def _engine(embedder, data: Path, docs: Path, chunker: ChunkerConfig) -> Engine:  # type: ignore[no-untyped-def]
    return make_engine(embedder, data, docs, chunker=chunker)


def test_a_chunker_change_marks_stale_searches_old_vectors_then_rebuilds(
    embedder: SentenceTransformerEmbedder, docs: Path, tmp_path: Path
) -> None:
    _engine(embedder, tmp_path / "data", docs, ChunkerConfig()).sync()
    eng = _engine(embedder, tmp_path / "data", docs, ChunkerConfig(target=200))
    assert sorted(eng.mark_stale()) == ["expenses.md", "on-call.md", "time-off.txt"]
    rec = eng.manifest.get("on-call.md")
    assert rec is not None and rec.state == STALE and "pipeline" in (rec.reason or "") and "t512" in (rec.reason or "")
    # Same embedding model: the old vectors still answer until the rebuild.
    assert eng.searcher().search("SEV1 acknowledge", k=1).hits[0].chunk.path == "on-call.md"
    report = eng.sync()
    assert sorted(report.indexed) == ["expenses.md", "on-call.md", "time-off.txt"]
    assert report.chunks_reused == 0 or report.chunks_embedded > 0
    rec = eng.manifest.get("on-call.md")
    assert rec is not None and rec.state == INDEXED and rec.stamps is not None and "t200" in rec.stamps.pipeline
    _agree(eng)


def test_vectors_of_another_model_are_never_searched(
    embedder: SentenceTransformerEmbedder, docs: Path, tmp_path: Path
) -> None:
    _engine(embedder, tmp_path / "data", docs, ChunkerConfig()).sync()
    other = RenamedEmbedder(embedder)
    eng = _engine(other, tmp_path / "data", docs, ChunkerConfig())
    eng.mark_stale()
    assert {r.state for r in eng.manifest.all().values()} == {STALE}
    assert eng.searcher().snapshot.chunks == []  # half-migrated: nothing of the old model is compared
    report = eng.sync()
    assert report.chunks_reused == 0 and other.calls > 0  # no vector borrowed across models
    recs = eng.manifest.all().values()
    assert {r.state for r in recs} == {INDEXED} and {r.stamps.embedding_model for r in recs} == {"another-model"}  # type: ignore[union-attr]
    _agree(eng)


def test_questions_during_a_sync_are_answered_from_the_last_index(
    embedder: SentenceTransformerEmbedder, docs: Path, tmp_path: Path
) -> None:
    gated = GatedEmbedder(embedder, trigger="twelve spaces")
    eng = make_engine(gated, tmp_path / "data", docs)
    eng.sync()
    eng.searcher()
    (docs / "time-off.txt").unlink()
    (docs / "new.md").write_text("# Parking\n\nThe garage under building B has twelve spaces for bicycles and cars.\n")
    gated.block = True
    worker = threading.Thread(target=eng.sync)
    worker.start()
    try:
        assert gated.entered.wait(30)
        # Mid-sync: time-off.txt is already gone from disk, but the old snapshot still answers.
        hit = eng.searcher().search("How many weeks of parental leave?", k=1).hits[0]
        assert hit.chunk.path == "time-off.txt"
        assert all(h.chunk.path != "new.md" for h in eng.searcher().search("garage spaces").hits)
    finally:
        gated.release.set()
        worker.join(30)
    assert eng.searcher().search("garage spaces for bicycles", k=1).hits[0].chunk.path == "new.md"
    assert all(h.chunk.path != "time-off.txt" for h in eng.searcher().search("parental leave").hits)
    _agree(eng)


KILLED_SYNC = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    from tests.conftest import make_engine
    from retrieval.models.embed import load_embedder
    make_engine(load_embedder(), Path(sys.argv[1]), Path(sys.argv[2])).sync()
    """
)


def test_sigkill_during_a_sync_is_completed_by_the_next_sync(
    embedder: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    docs, data = tmp_path / "docs", tmp_path / "data"
    docs.mkdir()
    for i in range(60):  # about 6 chunks each: several embedding batches, so the kill lands mid-sync
        paras = "\n\n".join(f"Team {i} rule {j}: tickets tagged t{i}-{j} go to queue {i * j}." for j in range(40))
        (docs / f"team-{i:02}.md").write_text(f"# Team {i}\n\n## Rules\n\n{paras}\n")
    proc = subprocess.Popen([sys.executable, "-c", KILLED_SYNC, str(data), str(docs), str(ROOT)])
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if _indexed_rows(data / "manifest.sqlite3") >= 1:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the sync finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    assert 1 <= _indexed_rows(data / "manifest.sqlite3") < 60
    eng = make_engine(embedder, data, docs)
    eng.sync()
    recs = eng.manifest.all()
    assert len(recs) == 60 and {r.state for r in recs.values()} == {INDEXED}
    ids = eng.store.chunk_ids()
    assert len(ids) == sum(r.chunks for r in recs.values())  # no duplicates, no orphans
    _agree(eng)


def _indexed_rows(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as con:
            return int(con.execute("SELECT COUNT(*) FROM documents WHERE state = 'indexed'").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_switching_the_embed_model_setting_restamps_and_rebuilds_every_document(
    embedder: SentenceTransformerEmbedder, docs: Path, tmp_path: Path
) -> None:
    """FOOTNOTE_EMBED_MODEL=DIR on an index built with the packaged model, through the builder:
    every document is stale at once (none of its vectors is compared with the new model's),
    then rebuilt. DIR is a copy of the packaged weights: another model as far as stamps go."""
    from bot.builder import Builder
    from config.settings import Settings
    from retrieval.models.embed import default_model_path

    _engine(embedder, tmp_path / "data", docs, ChunkerConfig()).sync()
    mine = tmp_path / "my-minilm"
    shutil.copytree(default_model_path(), mine)
    settings = Settings(docs_dir=docs, data_dir=tmp_path / "data", embed_model=str(mine), embed_runtime="torch-fp32")
    eng = Builder(settings).engine
    assert eng.embedder.name.startswith("my-minilm@")
    assert sorted(eng.mark_stale()) == sorted(eng.manifest.all())
    assert eng.searcher().snapshot.chunks == []
    eng.sync()
    assert {r.stamps.embedding_model for r in eng.manifest.all().values()} == {eng.embedder.name}  # type: ignore[union-attr]
    assert eng.searcher().search("How fast must a SEV1 page be acknowledged?", k=1).hits[0].chunk.path == "on-call.md"
