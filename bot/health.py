"""Index health for people: counts by state, reasons, last and next sync.

Read from the manifest (what the index really holds), never from what a sync
said it did. Used by `/ask status` and the App Home tab, for the documents in the
asking channel's scope, and by ``GET /healthz``, which needs no authentication and
so reports counts only: no document paths, no failure reasons.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from bot.scoping import in_folders
from retrieval.index import FAILED, INDEXED, STALE, WRITING, Manifest, totals
from retrieval.search import Calibration, LastSync


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
    scope: tuple[str, ...] | None = None  # the folders counted (None: the whole index)

    @property
    def ok(self) -> bool:
        """Something to answer from, and the last sync did not fail."""
        return self.indexed > 0 and self.last_sync_error is None

    def as_json(self) -> dict[str, object]:
        """Counts only (for ``/healthz``): which documents failed, and why, is for `footnote status`."""
        return {
            "ok": self.ok,
            "documents": self.indexed + len(self.failed) + len(self.stale),
            INDEXED: self.indexed,
            FAILED: len(self.failed),
            STALE: len(self.stale),
            "chunks": self.chunks,
            "last_sync_at": self.last_sync_at,
            "last_sync_seconds": self.last_sync_seconds,
            "last_sync_failed": self.last_sync_error is not None,
            "next_sync": self.next_sync.isoformat() if self.next_sync else None,
            "gate": self.calibration.summary() if self.calibration else None,
            **self.extra,
        }


def index_health(
    manifest: Manifest,
    last: LastSync | None = None,
    next_sync: datetime | None = None,
    calibration: Calibration | None = None,
    folders: Sequence[str] | None = None,
) -> Health:
    """The index's health, counting only the documents under ``folders`` (None: all of them).
    ``last``: this process's last sync (None before its first)."""
    recs = [r for r in manifest.all().values() if in_folders(r.path, folders)]
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
        scope=tuple(folders) if folders is not None else None,
    )
