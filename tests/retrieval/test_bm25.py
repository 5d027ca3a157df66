"""The sparse BM25 scorer ranks exactly like rank-bm25's BM25Okapi, and stays fast to build."""

from __future__ import annotations

import random

import numpy as np
from rank_bm25 import BM25Okapi

from retrieval.bm25 import Bm25Index, tokenize

WORDS = "cache page sev1 incident token model claim receipt leave travel the a of gradient lora".split()


def _corpus(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    # Skewed word frequencies, so some words are in more than half the chunks (negative idf, floored).
    return [" ".join(rnd.choices(WORDS, weights=range(len(WORDS), 0, -1), k=rnd.randint(1, 40))) for _ in range(n)]


def test_scores_equal_rank_bm25_okapi() -> None:
    for seed in range(5):
        texts = _corpus(300, seed)
        ours = Bm25Index(texts)
        ref = BM25Okapi([tokenize(t) or ["\u2205"] for t in texts], k1=1.2, b=0.75)
        for query in ("cache page", "sev1 sev1 incident", "the a of", "lora gradient travel unknownword", "nothing"):
            toks = [t for t in tokenize(query) if t in ours.idf]
            want = ref.get_scores(toks) if toks else np.zeros(len(texts))
            got = ours.scores(query)
            assert got.shape == (len(texts),)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
            assert list(np.argsort(-got, kind="stable")[:20]) == list(
                np.argsort(-want.astype(np.float32), kind="stable")[:20]
            )


def test_empty_index_and_unknown_words() -> None:
    assert Bm25Index([]).scores("anything").shape == (0,)
    idx = Bm25Index(["alpha beta", "gamma"])
    assert not idx.scores("delta").any()
    assert idx.coverage("alpha delta") < 1.0 and idx.coverage("alpha") == 1.0
