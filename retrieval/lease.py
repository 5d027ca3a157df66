"""The sync lease: only one process (or replica) syncs an index at a time.

Two kinds with one protocol: :class:`FileLease` (an ``flock`` in the data dir, for
one machine) and :class:`ChromaLease` (a record in the shared Chroma server, for
replicas). Each also keeps a generation counter that tells the other processes the
index changed. The add-then-read-back helpers are here because a lease and a
first-come claim are the same trick on a store without compare-and-set.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from retrieval.store import ChromaStore

LOCKS = "footnote_locks"  # the Chroma collection every replica shares


class Lease(Protocol):
    def acquire(self) -> bool: ...

    def release(self) -> None: ...

    def generation(self) -> int: ...

    def bump(self) -> int: ...


class FileLease:
    """The sync lease on one machine: an exclusive ``flock`` on a file in the data dir.

    It keeps `footnote index` and a running `footnote serve` from syncing at the same
    time; the kernel drops it if the holder dies. A generation file tells the other
    process that the index changed.
    """

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self._path = data_dir / "sync.lock"
        self._gen = data_dir / "generation"
        self._fd: int | None = None

    def acquire(self) -> bool:
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def generation(self) -> int:
        try:
            return int(self._gen.read_text() or 0)
        except (OSError, ValueError):
            return 0

    def bump(self) -> int:
        n = self.generation() + 1
        tmp = self._gen.with_suffix(".tmp")
        tmp.write_text(str(n))
        tmp.replace(self._gen)
        return n


class ChromaLease:
    """A sync lease every replica can see: a record in the shared store that expires.

    Chroma has no compare-and-set, so taking the lease is add-then-read-back: ``add``
    never overwrites an existing id, and whoever's owner id is read back holds it.
    The generation counter tells other replicas that the index changed.
    """

    def __init__(
        self, store: ChromaStore, owner: str, ttl_s: float = 900.0, clock: Callable[[], float] = time.time
    ) -> None:
        self._c = store.collection(LOCKS)
        self.owner = owner
        self.ttl_s = ttl_s
        self._clock = clock  # wall time: the expiry is compared across machines

    def acquire(self) -> bool:
        now = self._clock()
        meta = read_record(self._c, "sync")
        if meta is not None:
            if float(meta.get("expires", 0)) > now and meta.get("owner") != self.owner:
                return False
            self._c.delete(ids=["sync"])  # expired (a crashed holder), or ours
        return take_record(self._c, "sync", self.owner, expires=now + self.ttl_s)

    def release(self) -> None:
        meta = read_record(self._c, "sync")
        if meta is not None and meta.get("owner") == self.owner:
            self._c.delete(ids=["sync"])

    def generation(self) -> int:
        meta = read_record(self._c, "generation")
        return int(meta.get("n", 0)) if meta is not None else 0

    def bump(self) -> int:
        n = self.generation() + 1
        self._c.upsert(ids=["generation"], embeddings=[[1.0]], metadatas=[{"n": n}])
        return n


def read_record(collection: Any, key: str) -> dict[str, Any] | None:
    """One record's metadata, or None when there is no such record."""
    got = collection.get(ids=[key], include=["metadatas"])
    return dict((got["metadatas"] or [{}])[0]) if got["ids"] else None


def take_record(collection: Any, key: str, owner: str, **fields: Any) -> bool:
    """Add ``key`` owned by ``owner`` and read it back: ``add`` never overwrites an
    existing id, so only the first writer sees its own owner id (Chroma has no
    compare-and-set)."""
    collection.add(ids=[key], embeddings=[[1.0]], metadatas=[{"owner": owner, **fields}])
    meta = read_record(collection, key)
    return meta is not None and meta.get("owner") == owner
