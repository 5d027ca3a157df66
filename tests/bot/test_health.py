"""Index health as people see it: read from the manifest, never from what a sync said."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.health import Health, index_health
from retrieval.errors import StoreError
from testkit.fakes import memory_engine
from tests.conftest import EXAMPLES


def test_ok_needs_documents_and_a_sync_that_did_not_fail() -> None:
    assert Health(indexed=3, failed={}, stale={}, chunks=10).ok
    assert not Health(indexed=0, failed={}, stale={}, chunks=0).ok  # nothing to answer from
    assert not Health(indexed=3, failed={}, stale={}, chunks=10, last_sync_error="drive unmounted").ok


def test_health_counts_states_reasons_and_the_last_sync(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(EXAMPLES, docs)
    (docs / "empty.md").write_bytes(b"")
    eng = memory_engine(docs)
    assert index_health(eng).last_sync_at is None and not index_health(eng).ok
    eng.sync()
    nxt = datetime(2026, 12, 1, 9, 15, tzinfo=UTC)
    h = index_health(eng, nxt)
    assert h.ok and h.indexed == 3 and set(h.failed) == {"empty.md"} and "empty" in h.failed["empty.md"]
    assert h.chunks == eng.manifest.totals()["chunks"] > 0
    assert h.last_sync_seconds is not None and h.next_sync == nxt
    js = h.as_json()
    assert js["documents"] == 4 and js["failed"] == 1 and js["next_sync"] == "2026-12-01T09:15:00+00:00"
    shutil.rmtree(docs)
    with pytest.raises(StoreError):
        eng.sync()
    h = index_health(eng)
    assert not h.ok and "docs folder not found" in (h.last_sync_error or "") and h.indexed == 3  # the index stays
