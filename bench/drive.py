"""A development corpus indexed as the product indexes it, for the benches that choose defaults."""

from __future__ import annotations

import tempfile
from pathlib import Path

from bot.builder import Builder
from config.settings import load_settings
from retrieval.evaluation import CachingEmbedder
from retrieval.models import seed_models


def indexed(folder: Path) -> Builder:
    """``folder/docs`` synced into a new data dir with the embedding model ``FOOTNOTE_EMBED_MODEL``
    gives it (vectors cached across runs, as ``footnote eval`` caches them), and the gate
    calibrated on it, as after ``footnote index``."""
    live = load_settings()
    tmp = Path(tempfile.mkdtemp(prefix="footnote-bench-"))
    seed_models(live.data_dir / "models", tmp / "models")
    s = live.model_copy(update={"docs_dir": folder / "docs", "data_dir": tmp, "chroma_url": None})
    plain = Builder(s)
    b = Builder(s, CachingEmbedder(plain.embedder, live.data_dir / "eval-cache"))
    b.embedding_in_use = plain.embedding_in_use  # the model the cache wraps
    b.engine.sync(progress=False)
    b.calibrator.ensure()
    return b
