"""The eval suite embeds each distinct text once across its strategies; ranks pair with an earlier run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retrieval.evaluation.suite import VectorCache, load_documents, paired_ranks


class CountingEmbedder:
    name, dimension, window = "counting", 3, 256

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        self.seen += list(texts)
        return np.asarray([[len(t), 1.0, 0.0] for t in texts], dtype=np.float32)

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def test_each_distinct_text_is_embedded_once() -> None:
    emb = CountingEmbedder()
    cache = VectorCache(emb)
    first = cache.embed(["a", "bb", "a"])
    again = cache.embed(["bb", "ccc"])
    assert emb.seen == ["a", "bb", "ccc"] and cache.embedded == 3
    assert first[0].tolist() == first[2].tolist() == [1.0, 1.0, 0.0]
    assert again[0].tolist() == first[1].tolist()
    assert cache.embed([]).shape == (0, 3)


def test_ranks_are_paired_with_an_earlier_run_by_id_and_style() -> None:
    before = [
        {"id": "q1", "style": "course", "rank": 1},
        {"id": "q1", "style": "ticket", "rank": None},
        {"id": "q2", "style": "ticket", "rank": 3},
        {"id": "gone", "style": "ticket", "rank": 1},  # not asked this time: not paired
    ]
    now = [
        {"id": "q1", "style": "course", "rank": 1},
        {"id": "q1", "style": "ticket", "rank": 2},  # found now, within 4 not 1
        {"id": "q2", "style": "ticket", "rank": 1},  # rose from 3 to 1
    ]
    got = {(t["style"], t["k"]): (t["n"], t["wins"], t["losses"]) for t in paired_ranks(now, before)}
    assert got == {
        ("all", 1): (3, 1, 0),
        ("all", 4): (3, 1, 0),
        ("course", 1): (1, 0, 0),
        ("course", 4): (1, 0, 0),
        ("ticket", 1): (2, 1, 0),
        ("ticket", 4): (2, 1, 0),
    }


def test_the_eval_reads_only_what_the_indexer_would(tmp_path: Path) -> None:
    docs, outside = tmp_path / "docs", tmp_path / "secret.md"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nInside the folder.\n")
    outside.write_text("# Secret\n\nOutside the folder.\n")
    (docs / "linked.md").symlink_to(outside)  # skipped by the walk, as a FIFO is (whose read never ends)
    assert [d.path for d in load_documents(docs, 10_000_000)] == ["a.md"]
