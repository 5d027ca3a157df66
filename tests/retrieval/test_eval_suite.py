"""The eval suite embeds each distinct text once across its strategies."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval.evaluation.suite import VectorCache


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
