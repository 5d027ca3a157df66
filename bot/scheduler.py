"""The sync schedule inside ``footnote serve`` (APScheduler, in a background thread).

One job, never overlapping itself (``max_instances=1``); a run missed while the
previous one was still going is folded into the next (``coalesce``). A sync asked for
now (``/ask sync``) runs in the same scheduler and never beside another of this
process's. The engine's own lock also keeps a sync and a `footnote retry` from
overlapping.
"""

from __future__ import annotations

import logging
import os
import threading
import zoneinfo
from collections.abc import Callable
from datetime import datetime, tzinfo
from enum import Enum
from typing import TypeAlias

import tzlocal
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from retrieval.errors import ConfigError, FootnoteError

log = logging.getLogger("footnote.sync")
JOB_ID = "footnote-sync"
Trigger: TypeAlias = CronTrigger | IntervalTrigger
Done: TypeAlias = Callable[[bool], object]  # hears whether a sync asked for ran through


def make_trigger(minutes: float, cron: str | None) -> Trigger | None:
    """A crontab expression wins over the interval; neither (interval 0) means no schedule.
    Both run in the machine's time zone (``TZ``)."""
    if not cron and minutes <= 0:
        return None
    zone = local_zone()
    if cron:
        try:
            return CronTrigger.from_crontab(cron, timezone=zone)
        except ValueError as exc:
            raise ConfigError(f"FOOTNOTE_SYNC_CRON: {cron!r} is not a crontab expression: {exc}") from exc
    return IntervalTrigger(seconds=minutes * 60, timezone=zone)


def local_zone() -> tzinfo:
    """The machine's time zone, read again (a cached one would hide a changed TZ). A TZ that
    names no zone ("Europe/Copenhagn") is a setting's error, not APScheduler's traceback."""
    try:
        return tzlocal.reload_localzone()
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(
            f"TZ: {os.environ.get('TZ', '')!r} is not a time zone; use a name such as Europe/Copenhagen or UTC"
        ) from exc


def run_logged(sync: Callable[[], object], what: str) -> bool:
    """Run ``sync``; whether it ran through. A failure is logged (and shown in status by the
    engine), never raised: the index it leaves keeps answering."""
    try:
        sync()
    except FootnoteError as exc:  # written for a person (a store that is down): one line each time
        log.error("%s failed: %s", what, exc)
    except Exception:
        log.exception("%s failed", what)
    else:
        return True
    return False


class SyncNow(Enum):
    """What asking for a sync now did."""

    STARTED = "started"
    RUNNING = "running"  # one is under way: what it finds is what the asker gets
    NOT_READY = "not ready"  # serve is still warming up; its first sync comes by itself


class SyncSchedule:
    def __init__(self, trigger: Trigger | None) -> None:
        self._trigger = trigger
        self._scheduler = BackgroundScheduler(daemon=True, timezone=trigger.timezone if trigger else "UTC")
        self._sync: Callable[[], object] | None = None
        self._guard = threading.Lock()  # over the two below
        self._running = False  # a sync of this schedule is under way
        self._waiting: list[Done] = []  # who hears how it went when it ends

    def start(self, sync: Callable[[], object]) -> None:
        """Run ``sync`` on the schedule (none without one), and when asked (:meth:`run_now`)."""
        self._sync = sync
        if self._trigger is not None:
            self._scheduler.add_job(
                self._run, self._trigger, id=JOB_ID, max_instances=1, coalesce=True, misfire_grace_time=300
            )
        self._scheduler.start()

    def _run(self, what: str = "scheduled sync", then: Done | None = None) -> None:
        if self._sync is None:
            return
        with self._guard:
            if then is not None:
                self._waiting.append(then)
            if self._running:  # one started meanwhile: its result is this one's
                log.info("%s skipped: a sync is already running", what)
                return
            self._running = True
        ok = False
        try:
            ok = run_logged(self._sync, what)
        finally:
            with self._guard:
                self._running = False
                waiting, self._waiting = self._waiting, []
        for told in waiting:
            try:
                told(ok)
            except Exception:  # telling an asker is a courtesy; the sync is done either way
                log.exception("could not say that the %s is done", what)

    def run_now(self, who: str = "", then: Done | None = None) -> SyncNow:
        """Sync now, in the background, unless one is running (``then`` hears how that one
        went) or the schedule has not started; ``then`` hears whether it ran through."""
        if self._sync is None or not self._scheduler.running:
            return SyncNow.NOT_READY
        with self._guard:
            if self._running:
                if then is not None:
                    self._waiting.append(then)
                return SyncNow.RUNNING
        what = f"sync asked for by {who}" if who else "sync asked for"
        log.info("%s", what)
        # A job of its own each time (no fixed id: a second ask must not replace the first's asker).
        self._scheduler.add_job(self._run, args=(what, then))
        return SyncNow.STARTED

    def next_run(self) -> datetime | None:
        job = self._scheduler.get_job(JOB_ID) if self._scheduler.running else None
        return job.next_run_time if job else None

    def shutdown(self) -> None:
        if self._scheduler.running:
            self._scheduler.shutdown(wait=False)
