"""Index health for people: counts by state, reasons, last and next sync.

Read from the manifest (what the index really holds), never from what a sync
said it did. Used by `/ask status`, the App Home tab and ``GET /healthz``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from retrieval.index import FAILED, INDEXED, STALE, WRITING, totals
from retrieval.search import Calibration, Engine


@dataclass(frozen=True)
class Health:
    indexed: int
    failed: dict[str, str]  # path -> reason
    stale: dict[str, str]
    chunks: int
    last_sync_at: float | None = None
    last_sync_seconds: float | None = None
    last_sync_error: str | None = None
    next_sync: datetime | None = None
    extra: dict[str, object] = field(default_factory=dict)
    calibration: Calibration | None = None  # the gate's self-calibration, when it is on

    @property
    def ok(self) -> bool:
        """Something to answer from, and the last sync did not fail."""
        return self.indexed > 0 and self.last_sync_error is None

    def as_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "documents": self.indexed + len(self.failed) + len(self.stale),
            INDEXED: self.indexed,
            FAILED: len(self.failed),
            STALE: len(self.stale),
            "chunks": self.chunks,
            "failures": self.failed,
            "stale_reasons": self.stale,
            "last_sync_at": self.last_sync_at,
            "last_sync_seconds": self.last_sync_seconds,
            "last_sync_error": self.last_sync_error,
            "next_sync": self.next_sync.isoformat() if self.next_sync else None,
            "gate": self.calibration.summary() if self.calibration else None,
            **self.extra,
        }


def index_health(engine: Engine, next_sync: datetime | None = None, calibration: Calibration | None = None) -> Health:
    recs = list(engine.manifest.all().values())
    last = engine.last_sync
    return Health(
        indexed=sum(r.state == INDEXED for r in recs),
        failed={r.path: r.reason or "unknown" for r in recs if r.state == FAILED},
        stale={r.path: r.reason or "rebuild pending" for r in recs if r.state in (STALE, WRITING)},
        chunks=totals(recs)["chunks"],
        last_sync_at=last.finished_at if last else None,
        last_sync_seconds=last.seconds if last else None,
        last_sync_error=last.error if last else None,
        next_sync=next_sync,
        calibration=calibration,
    )
