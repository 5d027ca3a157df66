"""Retrieval and the gate on the dev set with the real embedder: the measured default must hold."""

from __future__ import annotations

from retrieval.engine import Engine
from retrieval.gate import GateConfig, gate_signal
from retrieval.search import SearchConfig, Searcher
from tests.conftest import DEV, read_jsonl


def _norm(s: str) -> str:
    return " ".join(s.split())


def _ranks(searcher: Searcher) -> list[int | None]:
    out: list[int | None] = []
    for q in read_jsonl(DEV / "questions.jsonl"):
        hits = searcher.search(q["question"], k=20).hits
        out.append(next((i + 1 for i, h in enumerate(hits) if _norm(q["needle"]) in _norm(h.chunk.content)), None))
    return out


def _recall(ranks: list[int | None], k: int) -> float:
    return sum(r is not None and r <= k for r in ranks) / len(ranks)


def test_default_ranking_beats_dense_and_meets_its_floor(dev_engine: Engine) -> None:
    default = _ranks(dev_engine.searcher())
    snap = dev_engine.searcher().snapshot
    dense = _ranks(Searcher(snap, dev_engine.embedder, SearchConfig(fusion="dense"), None, dev_engine.store))
    assert _recall(default, 1) >= 0.55 and _recall(default, 4) >= 0.80
    assert _recall(default, 1) > _recall(dense, 1)


def test_gate_separates_answerable_from_out_of_domain(dev_engine: Engine) -> None:
    s = dev_engine.searcher()
    cfg = GateConfig()
    bluffs = sum(gate_signal(s.search(q["question"]), cfg) <= cfg.threshold for q in read_jsonl(DEV / "ood.jsonl"))
    refused = sum(
        gate_signal(s.search(q["question"]), cfg) > cfg.threshold for q in read_jsonl(DEV / "questions.jsonl")
    )
    assert bluffs <= 3
    assert refused <= 8


def test_context_from_a_thread_steers_a_follow_up(dev_engine: Engine) -> None:
    s = dev_engine.searcher()
    follow = s.search("and how much memory does it save?", k=1, context=["What is LoRA?"]).hits[0]
    assert "LoRA" in follow.chunk.doc_title
