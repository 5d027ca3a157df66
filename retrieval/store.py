"""The vector store (the only module that imports chromadb).

Two collections: ``chunks`` (one vector per chunk, with the chunk's own fields as
metadata) and ``sentences`` (one vector per sentence of a chunk, for best-sentence
scoring). We always pass our own vectors: Chroma's default embedding function would
try to download a model, so the collections get one that refuses to run.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.errors import StoreError
from retrieval.manifest import DocRecord, from_fields, to_fields, totals
from retrieval.types import Chunk

CHUNKS, SENTENCES = "footnote_chunks", "footnote_sentences"
MANIFEST, LOCKS = "footnote_manifest", "footnote_locks"  # shared by every replica


class _RefuseToEmbed:
    """Stands in for Chroma's default embedding function, which must never run."""

    def __call__(self, input: Sequence[str]) -> list[Any]:  # noqa: A002 - Chroma's signature
        raise StoreError("internal error: Chroma was asked to embed text; Footnote always passes vectors")

    @staticmethod
    def name() -> str:
        return "footnote-refuse"

    def is_legacy(self) -> bool:
        return False

    def get_config(self) -> dict[str, Any]:
        return {}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> _RefuseToEmbed:
        return _RefuseToEmbed()

    def default_space(self) -> str:
        return "cosine"

    def supported_spaces(self) -> list[str]:
        return ["cosine"]


@dataclass(frozen=True)
class StoredIndex:
    """Everything search needs, read back from the store in one pass."""

    chunks: list[Chunk]
    vectors: np.ndarray  # (n_chunks, dim), normalised
    sentence_vectors: np.ndarray  # (n_sentences, dim), normalised
    sentence_owner: np.ndarray  # (n_sentences,) index into ``chunks``


class ChromaStore:
    """Chunks and sentence vectors in Chroma: on disk by default, a server when a URL is set."""

    def __init__(self, path: Path | None = None, url: str | None = None) -> None:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
        self._url = url
        try:
            if url:
                from urllib.parse import urlparse

                u = urlparse(url)
                self._client = chromadb.HttpClient(
                    host=u.hostname or "localhost", port=u.port or 8000, ssl=u.scheme == "https", settings=settings
                )
            else:
                assert path is not None
                path.mkdir(parents=True, exist_ok=True)
                self._client = chromadb.PersistentClient(path=str(path), settings=settings)
            ef = _RefuseToEmbed()
            self._chunks = self._client.get_or_create_collection(
                CHUNKS,
                metadata={"hnsw:space": "cosine"},
                embedding_function=ef,  # type: ignore[arg-type]
            )
            self._sentences = self._client.get_or_create_collection(
                SENTENCES,
                metadata={"hnsw:space": "cosine"},
                embedding_function=ef,  # type: ignore[arg-type]
            )
            self._batch = int(self._client.get_max_batch_size())
            self._ef = ef
        except StoreError:
            raise
        except Exception as exc:
            where = url or path
            raise StoreError(f"cannot open the vector store at {where}: {exc}") from exc

    @property
    def shared(self) -> bool:
        """True for a Chroma server that other replicas may use too."""
        return self._url is not None

    def collection(self, name: str) -> Any:
        try:
            return self._client.get_or_create_collection(name, embedding_function=self._ef)  # type: ignore[arg-type]
        except Exception as exc:
            raise StoreError(f"cannot open the {name} collection: {exc}") from exc

    def add(
        self,
        chunks: Sequence[Chunk],
        vectors: np.ndarray,
        sentences: Sequence[Sequence[str]],
        sentence_vectors: Sequence[np.ndarray],
    ) -> None:
        """Add chunks with their vector, and each chunk's sentences with theirs."""
        for lo in range(0, len(chunks), self._batch):
            part = chunks[lo : lo + self._batch]
            self._chunks.add(
                ids=[c.id for c in part],
                embeddings=vectors[lo : lo + len(part)],
                documents=[c.content for c in part],
                metadatas=[_chunk_meta(c) for c in part],
            )
        s_ids: list[str] = []
        s_docs: list[str] = []
        s_vecs: list[np.ndarray] = []
        s_meta: list[dict[str, Any]] = []
        for c, texts, sv in zip(chunks, sentences, sentence_vectors, strict=True):
            for i, (text, v) in enumerate(zip(texts, sv, strict=True)):
                s_ids.append(f"{c.id}:s{i}")
                s_docs.append(text)
                s_vecs.append(v)
                s_meta.append({"chunk_id": c.id, "path": c.path})
        for lo in range(0, len(s_ids), self._batch):
            self._sentences.add(
                ids=s_ids[lo : lo + self._batch],
                embeddings=np.asarray(s_vecs[lo : lo + self._batch], dtype=np.float32),
                documents=s_docs[lo : lo + self._batch],
                metadatas=s_meta[lo : lo + self._batch],  # type: ignore[arg-type]
            )

    def vectors_for(self, paths: Sequence[str]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Stored vectors of these documents keyed by the text they embed (chunk ``text``, sentence).

        The indexer reuses them for unchanged text: a rename or a one-paragraph edit
        re-embeds nothing (or only what changed).
        """
        if not paths:
            return {}, {}
        where = {"path": {"$in": list(paths)}}
        got = self._chunks.get(where=where, include=["embeddings", "metadatas"])  # type: ignore[arg-type]
        vecs = _matrix(got["embeddings"])
        chunks = {str(m["text"]): vecs[i] for i, m in enumerate(got["metadatas"] or [])}
        sg = self._sentences.get(where=where, include=["embeddings", "documents"])  # type: ignore[arg-type]
        svecs = _matrix(sg["embeddings"])
        sents = {d: svecs[i] for i, d in enumerate(sg["documents"] or []) if d}
        return chunks, sents

    def delete_paths(self, paths: Sequence[str]) -> None:
        if not paths:
            return
        where = {"path": {"$in": list(paths)}}
        self._sentences.delete(where=where)  # type: ignore[arg-type]
        self._chunks.delete(where=where)  # type: ignore[arg-type]

    def chunk_ids(self, path: str | None = None) -> set[str]:
        where = {"path": path} if path else None
        got = self._chunks.get(where=where, include=[])  # type: ignore[arg-type]
        return set(got["ids"])

    def count_by_path(self, paths: Sequence[str] | None = None) -> dict[str, int]:
        """Stored chunks per document (all documents, or only ``paths``)."""
        if paths is not None and not paths:
            return {}
        where = {"path": {"$in": list(paths)}} if paths is not None else None
        got = self._chunks.get(where=where, include=["metadatas"])  # type: ignore[arg-type]
        return dict(Counter(str(m["path"]) for m in got["metadatas"] or []))

    def load(self) -> StoredIndex:
        got = self._chunks.get(include=["embeddings", "documents", "metadatas"])
        chunks = [
            _chunk_from(i, d, m)
            for i, d, m in zip(got["ids"], got["documents"] or [], got["metadatas"] or [], strict=True)
        ]
        order = sorted(range(len(chunks)), key=lambda k: (chunks[k].path, chunks[k].ordinal))
        chunks = [chunks[k] for k in order]
        vectors = _matrix(got["embeddings"])[order]
        pos = {c.id: k for k, c in enumerate(chunks)}
        sg = self._sentences.get(include=["embeddings", "metadatas"])
        owners = np.asarray([pos.get(str(m["chunk_id"]), -1) for m in sg["metadatas"] or []], dtype=np.int64)
        # Ids are "<chunk id>:s<i>": sentences are kept in their chunk's order, so the
        # i-th vector of a chunk belongs to its i-th sentence span (the answer's evidence).
        ordinal = np.asarray([int(i.rsplit(":s", 1)[1]) for i in sg["ids"]], dtype=np.int64)
        keep = np.flatnonzero(owners >= 0)  # a sentence whose chunk is gone (a crash mid-write) is dropped
        keep = keep[np.lexsort((ordinal[keep], owners[keep]))]
        return StoredIndex(chunks, vectors, _matrix(sg["embeddings"])[keep], owners[keep])

    def query(self, vector: np.ndarray, n: int, paths: Sequence[str] | None = None) -> tuple[list[str], list[float]]:
        """Nearest chunks by cosine distance (Chroma's HNSW)."""
        total = self._chunks.count()
        if total == 0:
            return [], []
        where = {"path": {"$in": list(paths)}} if paths else None
        res = self._chunks.query(query_embeddings=[vector], n_results=min(n, total), where=where, include=["distances"])  # type: ignore[arg-type]
        return list(res["ids"][0]), [float(d) for d in (res["distances"] or [[]])[0]]


def _matrix(rows: Any) -> np.ndarray:
    """Embeddings as a float32 matrix; (0, 0) when there are none."""
    arr = np.asarray(rows if rows is not None else [], dtype=np.float32)
    return arr if arr.ndim == 2 else np.zeros((0, 0), np.float32)


def _chunk_meta(c: Chunk) -> dict[str, Any]:
    return {
        "path": c.path,
        "doc_title": c.doc_title,
        "section": c.section,
        "ordinal": c.ordinal,
        "start": c.start,
        "end": c.end,
        "text": c.text,
        "meta": json.dumps(c.meta),
    }


def _chunk_from(cid: str, content: str | None, m: Any) -> Chunk:
    return Chunk(
        id=cid,
        path=str(m["path"]),
        doc_title=str(m["doc_title"]),
        section=str(m["section"]),
        ordinal=int(m["ordinal"]),
        text=str(m["text"]),
        content=content or "",
        start=int(m["start"]),
        end=int(m["end"]),
        meta=json.loads(str(m.get("meta") or "{}")),
    )


class ChromaManifest:
    """The manifest kept in the Chroma server, so every replica reads the same records.

    Chroma stores records with a vector; these carry a constant one-dimensional one
    and are only ever read by id or in full.
    """

    def __init__(self, store: ChromaStore) -> None:
        self._c = store.collection(MANIFEST)

    def all(self) -> dict[str, DocRecord]:
        got = self._c.get(include=["metadatas"])
        recs = [from_fields(i, m) for i, m in zip(got["ids"], got["metadatas"] or [], strict=True)]
        return {r.path: r for r in sorted(recs, key=lambda r: r.path)}

    def get(self, path: str) -> DocRecord | None:
        got = self._c.get(ids=[path], include=["metadatas"])
        return from_fields(path, got["metadatas"][0]) if got["ids"] and got["metadatas"] else None

    def put(self, rec: DocRecord) -> None:
        self.put_many([rec])

    def put_many(self, recs: list[DocRecord]) -> None:
        if recs:
            self._c.upsert(
                ids=[r.path for r in recs],
                embeddings=[[1.0]] * len(recs),
                metadatas=[to_fields(r) for r in recs],  # type: ignore[misc]
            )

    def delete(self, path: str) -> None:
        self._c.delete(ids=[path])

    def totals(self) -> dict[str, int]:
        return totals(self.all().values())


class ChromaLease:
    """A sync lease every replica can see: a record in the shared store that expires.

    Chroma has no compare-and-set, so taking the lease is add-then-read-back: ``add``
    never overwrites an existing id, and whoever's owner id is read back holds it.
    The generation counter tells other replicas that the index changed.
    """

    def __init__(self, store: ChromaStore, owner: str, ttl_s: float = 900.0) -> None:
        self._c = store.collection(LOCKS)
        self.owner = owner
        self.ttl_s = ttl_s

    def acquire(self) -> bool:
        now = time.time()
        meta = _read(self._c, "sync")
        if meta is not None:
            if float(meta.get("expires", 0)) > now and meta.get("owner") != self.owner:
                return False
            self._c.delete(ids=["sync"])  # expired (a crashed holder), or ours
        return take(self._c, "sync", self.owner, expires=now + self.ttl_s)

    def release(self) -> None:
        meta = _read(self._c, "sync")
        if meta is not None and meta.get("owner") == self.owner:
            self._c.delete(ids=["sync"])

    def generation(self) -> int:
        meta = _read(self._c, "generation")
        return int(meta.get("n", 0)) if meta is not None else 0

    def bump(self) -> int:
        n = self.generation() + 1
        self._c.upsert(ids=["generation"], embeddings=[[1.0]], metadatas=[{"n": n}])
        return n


def _read(collection: Any, key: str) -> dict[str, Any] | None:
    """One record's metadata, or None when there is no such record."""
    got = collection.get(ids=[key], include=["metadatas"])
    return dict((got["metadatas"] or [{}])[0]) if got["ids"] else None


def take(collection: Any, key: str, owner: str, **fields: Any) -> bool:
    """Add ``key`` owned by ``owner`` and read it back: ``add`` never overwrites an
    existing id, so only the first writer sees its own owner id (Chroma has no
    compare-and-set)."""
    collection.add(ids=[key], embeddings=[[1.0]], metadatas=[{"owner": owner, **fields}])
    meta = _read(collection, key)
    return meta is not None and meta.get("owner") == owner
