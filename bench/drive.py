"""A development corpus for the benches: its JSONL question files, and its documents indexed as
the product indexes them."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from bot.builder import Builder
from config.settings import load_settings
from retrieval.evaluation import CachingEmbedder
from retrieval.models import seed_models


def rows(path: Path) -> list[dict[str, str]]:
    """The records of a JSON-lines file (blank lines skipped)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def indexed(folder: Path, calibrate: bool = True) -> Builder:
    """``folder/docs`` synced into a new data dir with the embedding model ``FOOTNOTE_EMBED_MODEL``
    gives it (vectors cached across runs, as ``footnote eval`` caches them), and the gate
    calibrated on it, as after ``footnote index`` (``calibrate=False``: for a caller that
    probes the index itself)."""
    live = load_settings()
    tmp = Path(tempfile.mkdtemp(prefix="footnote-bench-"))
    seed_models(live.data_dir / "models", tmp / "models")
    s = live.model_copy(update={"docs_dir": folder / "docs", "data_dir": tmp, "chroma_url": None})
    plain = Builder(s)
    b = Builder(s, CachingEmbedder(plain.embedder, live.data_dir / "eval-cache"))
    b.embedding_in_use = plain.embedding_in_use  # the model the cache wraps
    b.engine.sync(progress=False)
    if calibrate:
        b.calibrator.ensure()
    return b
