"""The CrossEncoder path (FOOTNOTE_RERANKER): plumbing with a tiny model the test builds itself."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from retrieval.embed import default_model_path
from retrieval.engine import Engine
from retrieval.errors import ConfigError
from retrieval.rerank import CrossEncoderReranker, load_reranker
from retrieval.search import Searcher


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
    s = Searcher(base.snapshot, examples_engine.embedder, base.cfg, reranker, examples_engine.store)
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
