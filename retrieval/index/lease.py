"""The sync lease: only one process (or replica) syncs an index at a time.

Two kinds with one protocol: :class:`FileLease` (an ``flock`` in the data dir, for
one machine) and :class:`SharedLease` (a record in the shared records of a Chroma
server, for replicas). Each also keeps a generation counter that tells the other
processes the index changed.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from retrieval.index.records import SharedRecords

LOCKS = "footnote_locks"  # the shared records of the lease and the generation


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


class SharedLease:
    """A sync lease every replica can see: a record in the shared records that expires.

    Taking it is put-if-absent: whoever's record is stored holds it. The generation
    counter tells other replicas that the index changed.
    """

    def __init__(
        self, records: SharedRecords, owner: str, ttl_s: float = 900.0, clock: Callable[[], float] = time.time
    ) -> None:
        self._r = records
        self.owner = owner
        self.ttl_s = ttl_s
        self._clock = clock  # wall time: the expiry is compared across machines

    def acquire(self) -> bool:
        now = self._clock()
        held = self._r.get("sync")
        if held is not None:
            if float(held.get("expires", 0)) > now and held.get("owner") != self.owner:
                return False
            self._r.delete("sync")  # expired (a crashed holder), or ours
        return self._r.put_if_absent("sync", {"owner": self.owner, "expires": now + self.ttl_s})

    def release(self) -> None:
        held = self._r.get("sync")
        if held is not None and held.get("owner") == self.owner:
            self._r.delete("sync")

    def generation(self) -> int:
        rec = self._r.get("generation")
        return int(rec.get("n", 0)) if rec is not None else 0

    def bump(self) -> int:
        n = self.generation() + 1
        self._r.put("generation", {"n": n})
        return n
