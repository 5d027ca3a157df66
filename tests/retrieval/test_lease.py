"""The sync lease: one holder at a time, on one machine (flock) and across replicas (Chroma)."""

from __future__ import annotations

from pathlib import Path

from retrieval.lease import ChromaLease, FileLease
from retrieval.store import ChromaStore
from tests.fakes import FakeClock


def test_a_file_lease_has_one_holder_and_counts_generations(tmp_path: Path) -> None:
    a, b = FileLease(tmp_path), FileLease(tmp_path)  # two processes on one data dir
    assert a.acquire()
    assert not b.acquire()
    a.release()
    assert b.acquire()
    b.release()
    assert a.generation() == 0
    assert a.bump() == 1 and b.generation() == 1 and b.bump() == 2 and a.generation() == 2


def test_a_chroma_lease_has_one_holder_until_it_expires(tmp_path: Path) -> None:
    store = ChromaStore(tmp_path / "chroma")
    clock = FakeClock(1_000_000.0)
    one = ChromaLease(store, "replica-1", ttl_s=60, clock=clock)
    two = ChromaLease(store, "replica-2", ttl_s=60, clock=clock)
    assert one.acquire()
    assert not two.acquire()
    assert one.acquire()  # its own lease: renewed
    two.release()  # not the holder: nothing happens
    assert not two.acquire()
    one.release()
    assert two.acquire()
    clock.advance(61)  # replica-2 died holding it: the lease expires
    assert one.acquire() and not two.acquire()
    assert one.generation() == 0 and one.bump() == 1 and two.generation() == 1
