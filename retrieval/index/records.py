"""Shared records: small keyed records every replica of Footnote sees.

The sync lease, the document manifest and Slack's first-delivery claims all need the
same few operations on records that replicas share: put a record only if its key is
free (whoever's record is stored afterwards holds it), read one or all, write, delete,
and delete those older than a time. :class:`SharedRecords` is that interface;
:class:`MemoryRecords` keeps it in one process (tests, one replica) and the Chroma
server's implementation lives with the rest of Chroma in :mod:`retrieval.index.store`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Protocol

Scalar = str | int | float | bool
Fields = Mapping[str, Scalar]


class SharedRecords(Protocol):
    """Records under string keys, each a flat mapping of scalar fields."""

    def put_if_absent(self, key: str, fields: Fields) -> bool:
        """Store ``fields`` under ``key`` unless a record is there; True when the record
        stored now is this one (so exactly one of several concurrent callers gets True)."""
        ...

    def put(self, key: str, fields: Fields) -> None:
        """Store ``fields`` under ``key``, replacing any record there."""
        ...

    def put_many(self, records: Mapping[str, Fields]) -> None: ...

    def get(self, key: str) -> dict[str, Scalar] | None: ...

    def all(self) -> dict[str, dict[str, Scalar]]: ...

    def delete(self, key: str) -> None: ...

    def delete_older_than(self, field: str, before: float) -> None:
        """Delete every record whose numeric ``field`` is below ``before``."""
        ...


class MemoryRecords:
    """:class:`SharedRecords` in one process's memory (shared by the objects holding it)."""

    def __init__(self) -> None:
        self._records: dict[str, dict[str, Scalar]] = {}
        self._lock = threading.Lock()

    def put_if_absent(self, key: str, fields: Fields) -> bool:
        with self._lock:
            if key in self._records:
                return False
            self._records[key] = dict(fields)
            return True

    def put(self, key: str, fields: Fields) -> None:
        self.put_many({key: fields})

    def put_many(self, records: Mapping[str, Fields]) -> None:
        with self._lock:
            self._records.update((k, dict(v)) for k, v in records.items())

    def get(self, key: str) -> dict[str, Scalar] | None:
        with self._lock:
            rec = self._records.get(key)
            return dict(rec) if rec is not None else None

    def all(self) -> dict[str, dict[str, Scalar]]:
        with self._lock:
            return {k: dict(v) for k, v in self._records.items()}

    def delete(self, key: str) -> None:
        with self._lock:
            self._records.pop(key, None)

    def delete_older_than(self, field: str, before: float) -> None:
        with self._lock:
            old = [
                k
                for k, v in self._records.items()
                if isinstance(v.get(field), int | float) and float(v[field]) < before
            ]
            for k in old:
                del self._records[k]
