"""Shared records: small keyed records every replica of Footnote sees.

The sync lease, the document manifest and Slack's first-delivery claims all need the
same few operations on records that replicas share: put a record only if its key is
free (whoever's record is stored afterwards holds it), read one or all, write, delete,
and delete those older than a time. :class:`SharedRecords` is that interface;
:class:`MemoryRecords` keeps it in one process (tests, one replica) and the Chroma
server's implementation lives with the rest of Chroma in :mod:`retrieval.index.store`;
:class:`SqliteRecords` keeps them in a file in the data dir, for what one box must keep
across restarts.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
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


class SqliteRecords:
    """:class:`SharedRecords` in a SQLite file: what one box keeps across restarts (the learned
    pairs, what a Slack button refers to), shared by every process on that data dir.

    One table per name in one file; each record's fields are stored as JSON.
    """

    def __init__(self, path: Path, name: str) -> None:
        if not name.isidentifier():
            raise ValueError(f"a records name must be an identifier, not {name!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._table = f"records_{name}"
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"CREATE TABLE IF NOT EXISTS {self._table} (key TEXT PRIMARY KEY, fields TEXT NOT NULL)")

    def put_if_absent(self, key: str, fields: Fields) -> bool:
        with self._lock:
            cur = self._db.execute(
                f"INSERT OR IGNORE INTO {self._table} (key, fields) VALUES (?, ?)", (key, json.dumps(dict(fields)))
            )
        return cur.rowcount > 0

    def put(self, key: str, fields: Fields) -> None:
        self.put_many({key: fields})

    def put_many(self, records: Mapping[str, Fields]) -> None:
        rows = [(k, json.dumps(dict(v))) for k, v in records.items()]
        with self._lock:
            self._db.executemany(f"INSERT OR REPLACE INTO {self._table} (key, fields) VALUES (?, ?)", rows)

    def get(self, key: str) -> dict[str, Scalar] | None:
        with self._lock:
            row = self._db.execute(f"SELECT fields FROM {self._table} WHERE key = ?", (key,)).fetchone()
        return dict(json.loads(row[0])) if row else None

    def all(self) -> dict[str, dict[str, Scalar]]:
        with self._lock:
            rows = self._db.execute(f"SELECT key, fields FROM {self._table}").fetchall()
        return {str(k): dict(json.loads(f)) for k, f in rows}

    def delete(self, key: str) -> None:
        with self._lock:
            self._db.execute(f"DELETE FROM {self._table} WHERE key = ?", (key,))

    def delete_older_than(self, field: str, before: float) -> None:
        old = [k for k, v in self.all().items() if isinstance(v.get(field), int | float) and float(v[field]) < before]
        with self._lock:
            self._db.executemany(f"DELETE FROM {self._table} WHERE key = ?", [(k,) for k in old])
