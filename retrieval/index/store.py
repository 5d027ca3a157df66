"""The vector store (the only module that imports chromadb).

Two collections: ``chunks`` (one vector per chunk, with the chunk's own fields
as metadata) and ``sentences`` (one vector per sentence of a chunk, for
best-sentence scoring). Search never queries Chroma: every question is an exact
scan of the in-memory snapshot loaded from here (see ``retrieval/search.py``). We always pass our own vectors: Chroma's default embedding function would
try to download a model, so the collections get one that refuses to run.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

import numpy as np

from retrieval.errors import StoreError, StoreUnreachable, disk_full, no_space
from retrieval.index.records import Fields, Scalar
from retrieval.types import Chunk

if TYPE_CHECKING:  # chromadb itself is imported when a store opens
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import Where

CHUNKS, SENTENCES = "footnote_chunks", "footnote_sentences"


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


class VectorStore(Protocol):
    """What the indexer and the engine need from a vector store (Chroma, or an in-memory fake)."""

    @property
    def shared(self) -> bool: ...

    def add(
        self,
        chunks: Sequence[Chunk],
        vectors: np.ndarray,
        sentences: Sequence[Sequence[str]],
        sentence_vectors: Sequence[np.ndarray],
    ) -> None: ...

    def vectors_for(self, paths: Sequence[str]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]: ...

    def delete_paths(self, paths: Sequence[str]) -> None: ...

    def chunk_ids(self, path: str | None = None) -> set[str]: ...

    def count_by_path(self, paths: Sequence[str] | None = None) -> dict[str, int]: ...

    def load(self) -> StoredIndex: ...


class ChromaStore:
    """Chunks and sentence vectors in Chroma: on disk by default, a server when a URL is set."""

    def __init__(self, path: Path | None = None, url: str | None = None) -> None:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
        self._url, self._path = url, path
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
            self._chunks = self._reached(
                self._client.get_or_create_collection(
                    CHUNKS,
                    metadata={"hnsw:space": "cosine"},
                    embedding_function=ef,  # type: ignore[arg-type]  # an EmbeddingFunction by its methods (see _RefuseToEmbed)
                )
            )
            self._sentences = self._reached(
                self._client.get_or_create_collection(
                    SENTENCES,
                    metadata={"hnsw:space": "cosine"},
                    embedding_function=ef,  # type: ignore[arg-type]  # an EmbeddingFunction by its methods (see _RefuseToEmbed)
                )
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

    def records(self, name: str) -> ChromaRecords:
        """Shared records in their own collection (the lease, the manifest, Slack's claims)."""
        try:
            collection = self._client.get_or_create_collection(name, embedding_function=self._ef)  # type: ignore[arg-type]  # as above
            return ChromaRecords(self._reached(collection))
        except StoreError:
            raise
        except Exception as exc:
            if self._url is not None and _unreachable(exc):
                raise _gone(self._url, exc) from exc
            raise StoreError(f"cannot open the {name} collection: {exc}") from exc

    def _reached(self, collection: Collection) -> Collection:
        """The collection, its failures a person can act on raised as one line: a server's
        calls as :class:`StoreUnreachable` when it does not answer, an on-disk one's as
        "no space left" when its disk is full."""
        url, path = self._url, self._path
        if url is not None:
            return cast("Collection", _Guarded(collection, lambda exc: _gone(url, exc) if _unreachable(exc) else None))
        assert path is not None
        return cast("Collection", _Guarded(collection, lambda exc: no_space(exc) if _full(path, exc) else None))

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
                metadatas=s_meta[lo : lo + self._batch],  # type: ignore[arg-type]  # Chroma's Metadata is a narrower dict
            )

    def vectors_for(self, paths: Sequence[str]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Stored vectors of these documents keyed by the text they embed (chunk ``text``, sentence).

        The indexer reuses them for unchanged text: a rename or a one-paragraph edit
        re-embeds nothing (or only what changed).
        """
        chunks: dict[str, np.ndarray] = {}
        sents: dict[str, np.ndarray] = {}
        for where in _path_filters(paths):
            got = get_all(self._chunks, where, ["embeddings", "metadatas"])
            vecs = _matrix(got["embeddings"])
            chunks.update((str(m["text"]), vecs[i]) for i, m in enumerate(got["metadatas"] or []))
            sg = get_all(self._sentences, where, ["embeddings", "documents"])
            svecs = _matrix(sg["embeddings"])
            sents.update((d, svecs[i]) for i, d in enumerate(sg["documents"] or []) if d)
        return chunks, sents

    def delete_paths(self, paths: Sequence[str]) -> None:
        for where in _path_filters(paths):
            self._sentences.delete(where=where)
            self._chunks.delete(where=where)

    def chunk_ids(self, path: str | None = None) -> set[str]:
        where: Where | None = {"path": path} if path else None
        return set(get_all(self._chunks, where, [])["ids"])

    def count_by_path(self, paths: Sequence[str] | None = None) -> dict[str, int]:
        """Stored chunks per document (all documents, or only ``paths``)."""
        wheres: Iterable[Where | None] = _path_filters(paths) if paths is not None else [None]
        counts: Counter[str] = Counter()
        for where in wheres:
            counts.update(str(m["path"]) for m in get_all(self._chunks, where, ["metadatas"])["metadatas"])
        return dict(counts)

    def load(self) -> StoredIndex:
        """Every chunk (ordered by document and position) with its vector, and every sentence vector."""
        got = get_all(self._chunks, None, ["embeddings", "documents", "metadatas"])
        chunks = [
            _chunk_from(i, d, m)
            for i, d, m in zip(got["ids"], got["documents"] or [], got["metadatas"] or [], strict=True)
        ]
        order = sorted(range(len(chunks)), key=lambda k: (chunks[k].path, chunks[k].ordinal))
        chunks = [chunks[k] for k in order]
        vectors = _matrix(got["embeddings"])[order]
        pos = {c.id: k for k, c in enumerate(chunks)}
        sg = get_all(self._sentences, None, ["embeddings", "metadatas"])
        owners = np.asarray([pos.get(str(m["chunk_id"]), -1) for m in sg["metadatas"] or []], dtype=np.int64)
        # Ids are "<chunk id>:s<i>": sentences are kept in their chunk's order, so the
        # i-th vector of a chunk belongs to its i-th sentence span (the answer's evidence).
        ordinal = np.asarray([int(i.rsplit(":s", 1)[1]) for i in sg["ids"]], dtype=np.int64)
        keep = np.flatnonzero(owners >= 0)  # a sentence whose chunk is gone (a crash mid-write) is dropped
        keep = keep[np.lexsort((ordinal[keep], owners[keep]))]
        return StoredIndex(chunks, vectors, _matrix(sg["embeddings"])[keep], owners[keep])


class _Guarded:
    """A Chroma collection whose calls raise what ``explain`` makes of a failure, one line a
    person can act on (a server that is down, restarting, or the network between; a disk
    that is full), instead of the error from deep inside chromadb; a failure it makes
    nothing of is raised as it is."""

    def __init__(self, collection: Any, explain: Callable[[Exception], StoreError | None]) -> None:
        self._c = collection
        self._explain = explain

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._c, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except Exception as exc:
                failure = self._explain(exc)
                if failure is None:
                    raise
                raise failure from exc

        return call


def _unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the server did not answer (chromadb's HTTP client is httpx)."""
    import httpx

    return isinstance(exc, httpx.TransportError | ConnectionError | TimeoutError)


LOW_SPACE = 64 * 2**20  # Chroma's own error for a full disk ("Error in compaction: …") does not say so


def _full(path: Path, exc: BaseException) -> bool:
    """Whether a failure of the on-disk store at ``path`` comes from a disk that is full."""
    if disk_full(exc):
        return True
    try:
        return shutil.disk_usage(path).free < LOW_SPACE
    except OSError:
        return False


def _gone(url: str, exc: BaseException) -> StoreUnreachable:
    return StoreUnreachable(f"the index at {url} is not reachable ({exc}); Footnote goes on when it is back")


PAGE = 10_000  # records a get reads at a time


def get_all(collection: Any, where: Where | None, include: list[str]) -> dict[str, list[Any]]:
    """Every record ``where`` matches, read a page at a time. Chroma reads a get's documents and
    metadata with one SQLite statement holding a variable per record, and SQLite allows 32,766:
    one get of more records fails ("too many SQL variables"), and an index of a drive with
    more sentences than that could not be loaded. A record seen twice (a write between two
    pages) is kept once."""
    out: dict[str, list[Any]] = {"ids": [], **{k: [] for k in include}}
    seen: set[str] = set()
    offset = 0
    while True:
        got = collection.get(where=where, include=include, limit=PAGE, offset=offset)
        fresh = [k for k, i in enumerate(got["ids"]) if i not in seen]
        seen.update(got["ids"])
        out["ids"] += [got["ids"][k] for k in fresh]
        for field in include:
            values = got[field]
            out[field] += [values[k] for k in fresh] if values is not None else []
        if len(got["ids"]) < PAGE:
            return out
        offset += PAGE


PATHS = 1_000  # paths in one filter: each is an SQL variable as well


def _path_filters(paths: Sequence[str]) -> Iterator[Where]:
    """Filters for records of any of ``paths``, at most ``PATHS`` at a time (a sync that finds
    a removed folder of 40,000 files deletes them all)."""
    for lo in range(0, len(paths), PATHS):
        yield _any_path(paths[lo : lo + PATHS])


def _any_path(paths: Sequence[str]) -> Where:
    """Chroma's filter for records of any of ``paths``."""
    values: list[str | int | float | bool] = list(paths)
    any_of: dict[Literal["$in", "$nin"], list[str | int | float | bool]] = {"$in": values}
    return {"path": any_of}


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


_DUMMY = [1.0]  # Chroma keeps a vector with every record; these records are only read by key
_NONCE = "_put"  # which put_if_absent wrote the record


class ChromaRecords:
    """:class:`~retrieval.index.records.SharedRecords` in a Chroma collection.

    Chroma has no compare-and-set, so ``put_if_absent`` is add-then-read-back: ``add``
    never overwrites an existing id, and the caller whose nonce is read back holds the key.
    """

    def __init__(self, collection: Any) -> None:
        self._c = collection

    def put_if_absent(self, key: str, fields: Fields) -> bool:
        nonce = uuid.uuid4().hex
        self._c.add(ids=[key], embeddings=[_DUMMY], metadatas=[{**fields, _NONCE: nonce}])
        got = self._c.get(ids=[key], include=["metadatas"])
        return bool(got["ids"]) and (got["metadatas"] or [{}])[0].get(_NONCE) == nonce

    def put(self, key: str, fields: Fields) -> None:
        self.put_many({key: fields})

    def put_many(self, records: Mapping[str, Fields]) -> None:
        if records:
            self._c.upsert(
                ids=list(records), embeddings=[_DUMMY] * len(records), metadatas=[dict(f) for f in records.values()]
            )

    def get(self, key: str) -> dict[str, Scalar] | None:
        got = self._c.get(ids=[key], include=["metadatas"])
        return _fields((got["metadatas"] or [{}])[0]) if got["ids"] else None

    def all(self) -> dict[str, dict[str, Scalar]]:
        got = get_all(self._c, None, ["metadatas"])
        return {k: _fields(m) for k, m in zip(got["ids"], got["metadatas"] or [], strict=True)}

    def delete(self, key: str) -> None:
        self._c.delete(ids=[key])

    def delete_older_than(self, field: str, before: float) -> None:
        self._c.delete(where={field: {"$lt": before}})


def _fields(meta: Mapping[str, Any] | None) -> dict[str, Scalar]:
    return {k: v for k, v in (meta or {}).items() if k != _NONCE}
