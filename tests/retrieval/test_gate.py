"""The gate: the only part of the pipeline that can say no, or "not sure"."""

from __future__ import annotations

import unicodedata

import pytest

from retrieval.search.gate import GateConfig, Verdict, decide, gate_signal, quoted_phrases
from retrieval.search.searcher import SearchResult
from retrieval.types import Chunk, Hit
from tests.conftest import ANSWERING


def _hit(content: str) -> Hit:
    return Hit(Chunk("c", "a.md", "A", "S", 0, content, content, 0, len(content)), 1.0, 0.2)


def _result(
    query: str, hits: list[Hit], distance: float = 0.3, coverage: float = 1.0, sentence: float | None = 0.0
) -> SearchResult:
    return SearchResult(query, hits, distance, coverage, {}, best_sentence_distance=sentence)


def test_signal_is_distances_plus_weighted_missing_coverage() -> None:
    cfg = GateConfig(threshold=0.7, coverage_weight=0.5, sentence_weight=0.25)
    result = _result("q", [], distance=0.4, coverage=0.6, sentence=0.8)
    assert gate_signal(result, cfg) == pytest.approx(0.4 + 0.25 * 0.8 + 0.5 * 0.4)


def test_an_index_without_sentence_vectors_counts_the_chunk_distance_twice() -> None:
    cfg = GateConfig(coverage_weight=0.0, sentence_weight=0.5)
    assert gate_signal(_result("q", [], distance=0.4, sentence=None), cfg) == pytest.approx(0.6)


def test_answers_below_the_assert_threshold_points_below_the_point_threshold_and_refuses_above() -> None:
    cfg = GateConfig(threshold=0.7, coverage_weight=0.5, point=0.9)
    hits = [_hit(f"passage {i}") for i in range(6)]
    ok = decide(_result("q", hits, distance=0.5), cfg, max_sources=4)
    assert ok.verdict is Verdict.ANSWER and ok.answerable and ok.reason == "ok" and ok.sources == hits[:4]
    unsure = decide(_result("q", hits, distance=0.5, coverage=0.5), cfg, max_sources=4)  # 0.5 + 0.25 > 0.7
    assert unsure.verdict is Verdict.POINT and not unsure.answerable and unsure.sources == hits[:4]
    assert "0.750 > 0.700" in unsure.reason and "not an answer" in unsure.reason
    no = decide(_result("q", hits, distance=0.7, coverage=0.5), cfg, max_sources=4)  # 0.7 + 0.25 > 0.9
    assert no.verdict is Verdict.REFUSE and no.sources == [] and "0.950 > 0.900" in no.reason


def test_a_point_threshold_below_the_assert_threshold_leaves_no_pointing_band() -> None:
    cfg = GateConfig(threshold=0.7, coverage_weight=0.5, point=0.6)
    d = decide(_result("q", [_hit("p")], distance=0.75), cfg, max_sources=4)
    assert d.verdict is Verdict.REFUSE and "0.750 > 0.700" in d.reason


def test_calibrated_thresholds_win_over_the_configured_ones() -> None:
    both = GateConfig(0.7, 0.5, calibrated=lambda: (0.4, 0.6), point=0.9).current()
    assert (both.threshold, both.point) == (0.4, 0.6)
    assert_only = GateConfig(0.7, 0.5, calibrated=lambda: 0.4, point=0.9).current()
    assert (assert_only.threshold, assert_only.point) == (0.4, 0.9)
    none_yet = GateConfig(0.7, 0.5, calibrated=lambda: None, point=0.9).current()
    assert (none_yet.threshold, none_yet.point) == (0.7, 0.9)


def test_an_empty_index_is_a_refusal() -> None:
    d = decide(_result("q", [], distance=1.0), ANSWERING, 4)
    assert not d.answerable and d.reason == "the index is empty"


def test_quoted_phrases_must_appear_verbatim_in_the_sources() -> None:
    assert quoted_phrases('what does "XQ-7781" mean in “the runbook”?') == ["XQ-7781", "the runbook"]
    hits = [_hit("Error XQ-7781 means the disk is full."), _hit("Unrelated text.")]
    d = decide(_result('what does "XQ-7781" mean?', hits), ANSWERING, 4)
    assert d.answerable and d.sources == hits[:1]  # only the source that holds the phrase
    d = decide(_result('what does "ZZ-0000" mean?', hits), ANSWERING, 4)
    assert not d.answerable and d.reason == 'no passage contains "ZZ-0000" verbatim'


def test_a_quoted_phrase_is_found_across_a_line_break_and_in_decomposed_letters() -> None:
    # Verbatim as a reader sees it: the document wraps the phrase, or spells "å" as "a" + a ring.
    hits = [_hit("Send the\n  quarterly report."), _hit(unicodedata.normalize("NFD", "Se afsnittet Årsregnskab."))]
    assert decide(_result('where is "the quarterly report"?', hits), ANSWERING, 4).sources == hits[:1]
    assert decide(_result('hvad står der i "Årsregnskab"?', hits), ANSWERING, 4).sources == hits[1:]
    assert not decide(_result('where is "The Quarterly Report"?', hits), ANSWERING, 4).answerable  # case is kept
