"""The manifest kept in a shared Chroma server, so every replica reads the same records.

Chroma stores records with a vector; these carry a constant one-dimensional one
and are only ever read by id or in full. The index's own facts (the docs folder it
was built from) live in a second small collection, apart from the documents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from retrieval.manifest import DocRecord, from_fields, to_fields, totals

if TYPE_CHECKING:
    from retrieval.store import ChromaStore

MANIFEST, INDEX_META = "footnote_manifest", "footnote_index_meta"


class ChromaManifest:
    """The :class:`~retrieval.manifest.Manifest` protocol on a Chroma server."""

    def __init__(self, store: ChromaStore) -> None:
        self._c = store.collection(MANIFEST)
        self._meta = store.collection(INDEX_META)

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

    def docs_folder(self) -> str | None:
        got = self._meta.get(ids=["docs_folder"], include=["metadatas"])
        return str(got["metadatas"][0]["value"]) if got["ids"] and got["metadatas"] else None

    def set_docs_folder(self, folder: str) -> None:
        self._meta.upsert(ids=["docs_folder"], embeddings=[[1.0]], metadatas=[{"value": folder}])
