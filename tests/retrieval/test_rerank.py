"""The CrossEncoder path (FOOTNOTE_RERANKER): plumbing with a tiny model the test builds itself."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from retrieval.errors import ConfigError
from retrieval.models.embed import default_model_path
from retrieval.search.engine import Engine
from retrieval.search.judge import load_reranker
from retrieval.search.rerank import CrossEncoderReranker
from retrieval.search.searcher import Searcher


def _tiny_cross_encoder(path: Path) -> Path:
    from transformers import BertConfig, BertForSequenceClassification

    cfg = BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, num_labels=1
    )
    BertForSequenceClassification(cfg).save_pretrained(path)
    src = Path(default_model_path())
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(src / name, path / name)
    return path


def test_cross_encoder_reranks_the_shortlist(examples_engine: Engine, tmp_path: Path) -> None:
    model_dir = _tiny_cross_encoder(tmp_path / "tiny-ce")
    reranker = load_reranker(str(model_dir), 1.5)
    assert isinstance(reranker, CrossEncoderReranker)
    base = examples_engine.searcher()
    s = Searcher(base.snapshot, examples_engine.embedder, base.cfg, reranker)
    hits = s.search("on-call allowance", k=10).hits
    assert len(hits) == 10
    assert all("cross_encoder" in h.signals for h in hits)
    scores = [h.signals["cross_encoder"] for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_missing_cross_encoder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="FOOTNOTE_RERANKER"):
        load_reranker(str(tmp_path / "nope"), 1.5)


def test_reranker_setting_defaults_and_off() -> None:
    assert load_reranker(None, 1.5) is not None
    assert load_reranker("none", 1.5) is None


def test_section_term_lifts_every_chunk_of_the_section_holding_the_best_sentence() -> None:
    import numpy as np

    from retrieval.index.snapshot import Snapshot
    from retrieval.index.store import StoredIndex
    from retrieval.search.rerank import Candidate, SentenceReranker
    from retrieval.types import Chunk

    def chunk(i: int, section: str) -> Chunk:
        return Chunk(f"c{i}", "a.md", "A", section, i, f"text {i}", f"text {i}", i * 10, i * 10 + 6)

    chunks = [chunk(0, "Setup"), chunk(1, "Setup"), chunk(2, "Billing")]
    eye = np.eye(3, dtype=np.float32)
    snap = Snapshot.build(StoredIndex(chunks, eye, eye, np.arange(3)), "m")
    best = np.array([0.9, 0.1, 0.5], dtype=np.float32)
    assert snap.section_max(best).tolist() == pytest.approx([0.9, 0.9, 0.5])
    q = np.array([0.1, 0.2, 0.3], dtype=np.float32)  # sentence cosines: chunk 2 best, then 1, then 0
    cands = [Candidate(i, 0.0) for i in range(3)]
    plain = SentenceReranker(1.0, 0.0).rerank("q", q, cands, snap)
    assert [c.index for c in plain] == [2, 1, 0]
    with_section = SentenceReranker(1.0, 1.0).rerank("q", q, cands, snap)
    assert with_section[0].signals["section"] == pytest.approx(0.3)
    assert [c.index for c in with_section] == [2, 1, 0]  # Billing's own best (0.3) still wins
    q2 = np.array([0.6, 0.1, 0.3], dtype=np.float32)  # Setup holds the best sentence (chunk 0)
    assert [c.index for c in SentenceReranker(1.0, 0.0).rerank("q", q2, cands, snap)] == [0, 2, 1]
    lifted = SentenceReranker(1.0, 1.0).rerank("q", q2, cands, snap)
    assert [c.index for c in lifted] == [0, 1, 2]  # chunk 1 rises above Billing with its section
