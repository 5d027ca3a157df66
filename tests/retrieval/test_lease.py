"""The sync lease: one holder at a time, on one machine (flock) and across replicas (shared records: Chroma, or memory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.index import MemoryRecords, SharedRecords
from retrieval.index.lease import LOCKS, FileLease, SharedLease
from retrieval.index.store import ChromaStore
from testkit.fakes import FakeClock


def test_a_file_lease_has_one_holder_and_counts_generations(tmp_path: Path) -> None:
    a, b = FileLease(tmp_path), FileLease(tmp_path)  # two processes on one data dir
    assert a.acquire()
    assert not b.acquire()
    a.release()
    assert b.acquire()
    b.release()
    assert a.generation() == 0
    assert a.bump() == 1 and b.generation() == 1 and b.bump() == 2 and a.generation() == 2


@pytest.fixture(params=["chroma", "memory"])
def records(request: pytest.FixtureRequest, tmp_path: Path) -> SharedRecords:
    return ChromaStore(tmp_path / "chroma").records(LOCKS) if request.param == "chroma" else MemoryRecords()


def test_a_shared_lease_has_one_holder_until_it_expires(records: SharedRecords) -> None:
    clock = FakeClock(1_000_000.0)
    one = SharedLease(records, "replica-1", ttl_s=60, clock=clock)
    two = SharedLease(records, "replica-2", ttl_s=60, clock=clock)
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
