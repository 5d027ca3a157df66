"""Metrics on hand-made cases with known answers."""

from __future__ import annotations

import unicodedata

import pytest

from retrieval.evaluation.metrics import destroyed, mrr, needle_rank, paired, passage, recall_at, sign_test, wilson
from retrieval.types import Chunk, Hit


def _hit(content: str) -> Hit:
    return Hit(Chunk("i", "p", "T", "S", 0, content, content, 0, len(content)), 1.0, 0.1)


def test_needle_rank_needs_the_whole_needle_whitespace_normalised() -> None:
    hits = [_hit("half of the sentence"), _hit("the whole\n  sentence is here."), _hit("the whole sentence is here.")]
    assert needle_rank(hits, "whole sentence is here.") == 2
    assert needle_rank(hits, "not present anywhere") is None


def test_a_needle_matches_a_document_written_in_decomposed_letters() -> None:
    # A Mac writes "å" as "a" + a combining ring (NFD); the question file spells it as one letter.
    hits = [_hit(unicodedata.normalize("NFD", "Årsrapporten indsendes på tid."))]
    assert needle_rank(hits, "årsrapporten indsendes på tid") == 1


def test_recall_and_mrr_by_hand() -> None:
    ranks = [1, 3, None, 25]
    assert recall_at(ranks, 1) == 0.25
    assert recall_at(ranks, 4) == 0.5
    assert recall_at(ranks, 25) == 0.75
    assert mrr(ranks) == pytest.approx((1 + 1 / 3) / 4)  # rank 25 is past the @20 cutoff


def test_wilson_matches_hand_computation() -> None:
    # p = 0.5, n = 64, z = 1.96: centre 0.5, half = 1.96 * sqrt(0.25/64 + 1.96²/(4·64²)) / (1 + 1.96²/64)
    lo, hi = wilson(32, 64)
    assert lo == pytest.approx(0.3810, abs=1e-4) and hi == pytest.approx(0.6190, abs=1e-4)
    assert wilson(0, 10)[0] == 0.0 and wilson(0, 10)[1] == pytest.approx(0.2775, abs=1e-4)
    assert wilson(10, 10)[1] == pytest.approx(1.0)
    assert wilson(0, 0) == (0.0, 1.0)


def test_sign_test_matches_binomial_by_hand() -> None:
    assert sign_test(18, 3) == pytest.approx(2 * (1 + 21 + 210 + 1330) / 2**21)  # 0.00149: the seed's E vs A
    assert sign_test(12, 2) == pytest.approx(2 * (1 + 14 + 91) / 2**14)  # 0.0129: the seed's E vs C
    assert sign_test(3, 3) == 1.0 and sign_test(0, 0) == 1.0
    assert sign_test(5, 0) == pytest.approx(2 / 32)


def test_paired_counts_only_discordant_questions() -> None:
    a = [1, 2, None, 5, 1]
    b = [None, 3, 1, None, 1]
    assert paired(a, b, 4) == (1, 1)  # q1 only a; q3 only b; q2 and q5 both; q4 neither within 4
    assert paired(a, b, 5) == (2, 1)


def _overlapped(content: str, tail: str) -> Chunk:
    start = 100
    return Chunk("i", "p", "T", "S", 0, f"[T > S]\n{tail}{content}", content, start, start + len(content),
                 {"overlap_start": start - len(tail)})  # fmt: skip


def test_passage_includes_the_overlap_tail_but_not_the_header() -> None:
    c = _overlapped("second half.", "first half and ")
    assert passage(c) == "first half and second half."
    assert destroyed([c], ["first half and second", "T > S", "missing"]) == ["T > S", "missing"]
