"""Property: any sequence of adds, edits, deletes and renames, then a sync, leaves
store ids == BM25 ids == manifest, and the index holds exactly the folder's current text.

This is about the indexer's bookkeeping, not about engines: the embedder, store,
manifest and lease are the in-memory fakes (``tests/test_store.py`` holds the fake
store to Chroma's behaviour).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.index.manifest import INDEXED
from testkit.fakes import memory_engine

NAMES = ["a.md", "b.md", "sub/c.md", "sub/d.txt"]
BODIES = [
    "# Alpha\n\nThe alpha team owns billing.\n",
    "# Beta\n\nBeta handles refunds within ten days.\n\n## More\n\nEscalate refunds over 500 EUR.\n",
    "# Gamma\n\nGamma rotates the VPN keys monthly.\n",
    "# Delta\n\n" + "Delta writes long paragraphs about onboarding. " * 30 + "\n",
]
ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.sampled_from(NAMES), st.sampled_from(BODIES)),
        st.tuples(st.just("delete"), st.sampled_from(NAMES), st.just("")),
        st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
        st.tuples(st.just("sync"), st.just(""), st.just("")),
    ),
    max_size=12,
)


def _apply(docs: Path, op: str, a: str, b: str) -> None:
    src = docs / a
    if op == "write":
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text(b)
    elif op == "delete" and src.exists():
        src.unlink()
    elif op == "rename" and src.exists() and a != b:
        (docs / b).parent.mkdir(parents=True, exist_ok=True)
        src.replace(docs / b)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_any_history_then_a_sync_leaves_store_bm25_and_manifest_in_agreement(
    history: list[tuple[str, str, str]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        docs = Path(tmp) / "docs"
        docs.mkdir()
        eng = memory_engine(docs)
        # allow_empty: a history may delete every file, and this is about the bookkeeping; an
        # emptied folder refused unless told (an unmounted drive) is tests/retrieval/test_indexer.py's.
        for op, a, b in history:
            if op == "sync":
                eng.sync(allow_empty=True)
            else:
                _apply(docs, op, a, b)
        eng.sync(allow_empty=True)
        on_disk = {p.relative_to(docs).as_posix(): p.read_text() for p in docs.rglob("*") if p.is_file()}
        recs = eng.manifest.all()
        assert set(recs) == set(on_disk)
        assert all(r.state == INDEXED for r in recs.values())
        stored = eng.store.count_by_path()
        assert stored == {p: r.chunks for p, r in recs.items()}
        snap = eng.searcher().snapshot
        ids = eng.store.chunk_ids()
        assert {c.id for c in snap.chunks} == ids and len(ids) == sum(stored.values()) == snap.bm25.size
        for c in snap.chunks:  # every stored chunk is the current text of its file, at its offsets
            assert on_disk[c.path].replace("\r\n", "\n")[c.start : c.end] == c.content
