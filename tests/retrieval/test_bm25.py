"""BM25 over the chunks and the vocabulary coverage the gate uses."""

from __future__ import annotations

import pytest

from retrieval.bm25 import Bm25Index, tokenize

TEXTS = [
    "The on-call engineer acknowledges a SEV1 page within five minutes.",
    "Expenses are filed in the Tally app within thirty days.",
    "Parental leave is twenty-four weeks.",
]


def test_tokenize_lowercases_and_splits_on_non_alphanumerics() -> None:
    assert tokenize("SEV1 on-call, Tally's app!") == ["sev1", "on", "call", "tally", "s", "app"]


def test_scores_rank_the_matching_chunk_first_and_are_zero_without_known_words() -> None:
    idx = Bm25Index(TEXTS)
    scores = idx.scores("how do I file expenses in tally")
    assert scores.shape == (3,) and int(scores.argmax()) == 1 and scores[1] > 0
    assert idx.scores("kubernetes upgrade").tolist() == [0.0, 0.0, 0.0]


def test_an_empty_index_scores_nothing() -> None:
    idx = Bm25Index([])
    assert idx.size == 0 and idx.scores("anything").shape == (0,)


def test_coverage_counts_unseen_content_words_at_full_idf_and_ignores_stopwords() -> None:
    idx = Bm25Index(TEXTS)
    assert idx.coverage("expenses tally") == pytest.approx(1.0)
    assert idx.coverage("what is the") == 1.0  # only stopwords: no evidence either way
    partial = idx.coverage("expenses kubernetes")
    assert 0.0 < partial < 0.5  # the unseen word weighs the most
    assert idx.coverage("kubernetes helm") == 0.0
