"""The sync schedule: runs repeatedly, never overlaps itself, rejects a bad crontab."""

from __future__ import annotations

import threading
import time

import pytest
from apscheduler.triggers.cron import CronTrigger

from bot.scheduler import SyncSchedule, make_trigger
from retrieval.errors import ConfigError


def test_scheduled_syncs_repeat_but_never_overlap() -> None:
    running, overlaps, runs = 0, 0, 0
    lock = threading.Lock()

    def slow_sync() -> None:
        nonlocal running, overlaps, runs
        with lock:
            running += 1
            overlaps += running > 1
            runs += 1
        time.sleep(0.3)  # longer than the interval: the next run must wait or be folded in
        with lock:
            running -= 1

    sched = SyncSchedule(slow_sync, minutes=0.1 / 60, cron=None)
    sched.start()
    try:
        assert sched.next_run() is not None
        time.sleep(1.5)
    finally:
        sched.shutdown()
    assert runs >= 2 and overlaps == 0


def test_a_failing_sync_does_not_stop_the_schedule() -> None:
    calls = []

    def broken() -> None:
        calls.append(1)
        raise RuntimeError("drive unmounted")

    sched = SyncSchedule(broken, minutes=0.1 / 60, cron=None)
    sched.start()
    try:
        time.sleep(0.6)
    finally:
        sched.shutdown()
    assert len(calls) >= 2


def test_cron_wins_over_interval_and_a_bad_one_is_a_clear_error() -> None:
    assert isinstance(make_trigger(15, "*/10 7-19 * * 1-5"), CronTrigger)
    assert make_trigger(0, None) is None
    with pytest.raises(ConfigError, match="not a crontab expression"):
        make_trigger(15, "every ten minutes")
