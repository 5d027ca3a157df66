"""Retrieval and the gate on the dev set with the real embedder: the measured default must hold."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from retrieval.evaluation.metrics import needle_rank, recall_at
from retrieval.models import Embedder
from retrieval.search.engine import Engine
from retrieval.search.gate import gate_signal
from retrieval.search.searcher import SearchConfig, Searcher, reciprocal_rank, without_pictographs
from tests.conftest import ANSWERING, DEV, EXAMPLES, make_engine, read_jsonl


def _ranks(searcher: Searcher) -> list[int | None]:
    return [
        needle_rank(searcher.search(q["question"], k=20).hits, q["needle"]) for q in read_jsonl(DEV / "questions.jsonl")
    ]


def test_default_ranking_beats_dense_and_meets_its_floor(dev_engine: Engine) -> None:
    default = _ranks(dev_engine.searcher())
    snap = dev_engine.searcher().snapshot
    dense = _ranks(Searcher(snap, dev_engine.embedder, SearchConfig(fusion="dense"), None))
    assert recall_at(default, 1) >= 0.55 and recall_at(default, 4) >= 0.80
    assert recall_at(default, 1) > recall_at(dense, 1)


def test_gate_separates_answerable_from_out_of_domain(dev_engine: Engine) -> None:
    s = dev_engine.searcher()
    cfg = ANSWERING
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


def test_reciprocal_rank_sums_one_over_k_plus_rank_by_hand() -> None:
    scores = reciprocal_rank((["a", "b", "c"], ["c", "d"]), k=60)
    assert scores == pytest.approx({"a": 1 / 61, "b": 1 / 62, "c": 1 / 63 + 1 / 61, "d": 1 / 62})
    assert list(scores) == ["a", "b", "c", "d"]  # first seen first: ties keep the first ranking's order
    assert max(scores, key=scores.__getitem__) == "c"


def test_emoji_are_left_out_of_what_a_message_is_embedded_as(dev_engine: Engine) -> None:
    """A chatty message's emoji are no words of any document (measured: docs/measurements.md)."""
    assert without_pictographs("Kan jeg smide den på bagefter? 🙈") == "Kan jeg smide den på bagefter?"
    assert without_pictographs("🤦\u200d♂️ forkert beløb ©") == "forkert beløb"
    assert without_pictographs("as  it\nwas → 10:30") == "as  it\nwas → 10:30"  # nothing left out: untouched
    assert without_pictographs("🤷") == "🤷"  # nothing else: the caller says there is nothing to search for
    s = dev_engine.searcher()
    plain, chatty = s.search("what does the tokenizer do?"), s.search("what does the tokenizer do? 🤔🙏")
    assert (plain.query_vector == chatty.query_vector).all()
    assert [h.chunk.id for h in plain.hits] == [h.chunk.id for h in chatty.hits]


def test_a_copied_document_s_passage_is_found_once_from_its_plainest_path(embedder: Embedder, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(EXAMPLES, docs)
    shutil.copy(docs / "on-call.md", docs / "on-call (1).md")  # a drive's copy: "Copy of …", "… (1)"
    eng = make_engine(embedder, tmp_path / "data", docs)
    eng.sync()
    hits = eng.searcher().search("got paged for a sev1, how long until I have to ack it?").hits
    contents = [h.chunk.content for h in hits]
    assert len(contents) == len(set(contents))  # each passage once: three shown are three passages
    assert hits[0].chunk.path == "on-call.md" and "within 5 minutes" in hits[0].chunk.content
