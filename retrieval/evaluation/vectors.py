"""Vectors of texts already embedded, kept on disk by embedding model and text hash.

`footnote eval` indexes the documents into a temporary directory and embeds every
chunking strategy's passages: on the 13-document dev set that is ~10,000 texts and
most of its three minutes. Run again on a corpus that changed a little (every
deploy), only the texts that changed are embedded: the rest come from this cache.
It belongs to one embedding model (the file is named by it) and keeps only the
texts of the last run, so it never grows past one run's worth.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from retrieval.models import Embedder

log = logging.getLogger("footnote.embed")


def _digest(text: str) -> bytes:
    return hashlib.sha1(text.encode("utf-8")).digest()


class CachingEmbedder:
    """An :class:`Embedder` that looks each text up in the cache before embedding it."""

    def __init__(self, inner: Embedder, folder: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.window = inner.window
        self.path = folder / f"{hashlib.sha1(f'{inner.name}|{inner.dimension}'.encode()).hexdigest()[:16]}.npz"
        self._stored = self._load()
        self._used: dict[bytes, np.ndarray] = {}
        self.hits = self.embedded = 0

    def _load(self) -> dict[bytes, np.ndarray]:
        try:
            with np.load(self.path) as data:
                keys, vecs = data["keys"], data["vectors"]
        except (OSError, ValueError, KeyError, zipfile.BadZipFile):  # none yet, or unreadable: start empty
            return {}
        if vecs.ndim != 2 or vecs.shape[1] != self.dimension or keys.shape != (len(vecs), 20):
            return {}
        return {k.tobytes(): v for k, v in zip(keys, vecs, strict=True)}

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        return self._cached(texts, lambda todo: self.inner.embed(todo, progress=progress), "")

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._cached(texts, self.inner.embed_queries, "query\0")  # another prefix, another vector

    def _cached(self, texts: Sequence[str], embed: Callable[[list[str]], np.ndarray], kind: str) -> np.ndarray:
        keys = [_digest(kind + t) for t in texts]
        first = {k: i for i, k in reversed(list(enumerate(keys)))}  # each distinct text once
        todo = [i for k, i in first.items() if k not in self._stored and k not in self._used]
        if todo:
            fresh = embed([texts[i] for i in todo])
            self._used.update((keys[i], v) for i, v in zip(todo, fresh, strict=True))
            self.embedded += len(todo)
        self.hits += len(texts) - len(todo)
        for k in keys:
            if k not in self._used:
                self._used[k] = self._stored[k]
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        return np.stack([self._used[k] for k in keys]).astype(np.float32)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def save(self) -> None:
        """Keep this run's vectors (only those) for the next run; a read-only disk only costs speed."""
        if not self._used:
            return
        # Raw bytes, not numpy's "S20": that strips a digest's trailing NUL bytes on reading.
        keys = np.frombuffer(b"".join(self._used), dtype=np.uint8).reshape(-1, 20)
        tmp = self.path.with_name(f"{self.path.stem}.{os.getpid()}.tmp.npz")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(tmp, keys=keys, vectors=np.stack(list(self._used.values())).astype(np.float32))
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("could not keep the eval's vectors in %s (%s): the next run embeds them again", self.path, exc)
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
