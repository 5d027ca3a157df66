"""Metrics on hand-made cases with known answers."""

from __future__ import annotations

import pytest

from retrieval.evaluate import mrr, needle_rank, recall_at
from retrieval.types import Chunk, Hit


def _hit(content: str) -> Hit:
    return Hit(Chunk("i", "p", "T", "S", 0, content, content, 0, len(content)), 1.0, 0.1)


def test_needle_rank_needs_the_whole_needle_whitespace_normalised() -> None:
    hits = [_hit("half of the sentence"), _hit("the whole\n  sentence is here."), _hit("the whole sentence is here.")]
    assert needle_rank(hits, "whole sentence is here.") == 2
    assert needle_rank(hits, "not present anywhere") is None


def test_recall_and_mrr_by_hand() -> None:
    ranks = [1, 3, None, 25]
    assert recall_at(ranks, 1) == 0.25
    assert recall_at(ranks, 4) == 0.5
    assert recall_at(ranks, 25) == 0.75
    assert mrr(ranks) == pytest.approx((1 + 1 / 3) / 4)  # rank 25 is past the @20 cutoff
