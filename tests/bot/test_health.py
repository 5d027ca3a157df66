"""Index health as people see it: read from the manifest, never from what a sync said."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.health import Health, index_health
from bot.render import status_text
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
    assert (
        index_health(eng.manifest, eng.last_sync).last_sync_at is None
        and not index_health(eng.manifest, eng.last_sync).ok
    )
    eng.sync()
    nxt = datetime(2026, 12, 1, 9, 15, tzinfo=UTC)
    h = index_health(eng.manifest, eng.last_sync, nxt)
    assert h.ok and h.indexed == 3 and set(h.failed) == {"empty.md"} and "empty" in h.failed["empty.md"]
    assert h.chunks == eng.manifest.totals()["chunks"] > 0
    assert h.last_sync_seconds is not None and h.next_sync == nxt
    js = h.as_json()
    assert js["documents"] == 4 and js["failed"] == 1 and js["next_sync"] == "2026-12-01T09:15:00+00:00"
    shutil.rmtree(docs)
    with pytest.raises(StoreError):
        eng.sync()
    h = index_health(eng.manifest, eng.last_sync)
    assert not h.ok and "docs folder not found" in (h.last_sync_error or "") and h.indexed == 3  # the index stays


def _two_folders(tmp_path: Path) -> Path:
    docs = tmp_path / "scoped"
    for folder, name in (("engineering", "on-call.md"), ("hr", "time-off.txt")):
        (docs / folder).mkdir(parents=True)
        shutil.copy(EXAMPLES / name, docs / folder / name)
    (docs / "hr" / "layoffs-plan-2026.md").write_bytes(b"")  # fails: an empty file
    return docs


def test_healthz_json_is_counts_only_and_a_scope_counts_only_its_documents(tmp_path: Path) -> None:
    eng = memory_engine(_two_folders(tmp_path))
    eng.sync()
    h = index_health(eng.manifest, eng.last_sync)
    reason = h.failed["hr/layoffs-plan-2026.md"]
    body = json.dumps(h.as_json())
    assert "layoffs" not in body and reason not in body  # no path, no reason
    assert h.as_json()["failed"] == 1 and h.as_json()["indexed"] == 2 and h.as_json()["last_sync_failed"] is False
    eng_only = index_health(eng.manifest, eng.last_sync, folders=["engineering"])
    assert eng_only.indexed == 1 and eng_only.failed == {} and eng_only.scope == ("engineering",)
    assert 0 < eng_only.chunks < h.chunks
    hr = index_health(eng.manifest, eng.last_sync, folders=["hr/"])
    assert hr.indexed == 1 and set(hr.failed) == {"hr/layoffs-plan-2026.md"}


def test_a_scoped_status_names_no_path_from_past_its_scope() -> None:
    h = Health(
        indexed=1,
        failed={},
        stale={},
        chunks=4,
        last_sync_error="docs folder not found: /srv/hr",
        scope=("engineering",),
    )
    text = status_text(h)
    assert "Index health in engineering/" in text and "Last sync failed" in text and "/srv/hr" not in text
    assert "/srv/hr" in status_text(Health(indexed=1, failed={}, stale={}, chunks=4, last_sync_error="/srv/hr gone"))
