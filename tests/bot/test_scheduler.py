"""The sync schedule: runs repeatedly, never overlaps itself, rejects a bad crontab.

Waits are on events with a timeout, never fixed sleeps: the scheduler's own
"max instances reached" event proves it tried to start a second run and refused.
"""

from __future__ import annotations

import threading

import pytest
from apscheduler.events import EVENT_JOB_MAX_INSTANCES
from apscheduler.triggers.cron import CronTrigger

from bot.scheduler import SyncNow, SyncSchedule, make_trigger
from retrieval.errors import ConfigError

INTERVAL = 0.1 / 60  # 0.1 s


def test_scheduled_syncs_repeat_but_never_overlap() -> None:
    running, overlaps, runs = 0, 0, 0
    lock = threading.Lock()
    refused = threading.Event()  # the scheduler wanted a second run while the first was going
    second = threading.Event()

    def slow_sync() -> None:
        nonlocal running, overlaps, runs
        with lock:
            running += 1
            overlaps += running > 1
            runs += 1
            first = runs == 1
        if first:  # hold the first run until the scheduler has been refused an overlapping one
            assert refused.wait(30)
        else:
            second.set()
        with lock:
            running -= 1

    sched = SyncSchedule(make_trigger(INTERVAL, None))
    sched._scheduler.add_listener(lambda _e: refused.set(), EVENT_JOB_MAX_INSTANCES)
    sched.start(slow_sync)
    try:
        assert sched.next_run() is not None
        assert refused.wait(30) and second.wait(30)
    finally:
        sched.shutdown()
    assert runs >= 2 and overlaps == 0


def test_a_failing_sync_does_not_stop_the_schedule() -> None:
    calls = []
    again = threading.Event()

    def broken() -> None:
        calls.append(1)
        if len(calls) >= 2:
            again.set()
        raise RuntimeError("drive unmounted")

    sched = SyncSchedule(make_trigger(INTERVAL, None))
    sched.start(broken)
    try:
        assert again.wait(30)
    finally:
        sched.shutdown()
    assert len(calls) >= 2


def test_no_interval_and_no_cron_schedules_nothing() -> None:
    sched = SyncSchedule(make_trigger(0, None))
    sched.start(lambda: None)
    try:
        assert sched.next_run() is None
    finally:
        sched.shutdown()


def test_a_sync_asked_for_now_runs_once_at_a_time_and_not_before_the_start() -> None:
    """`/ask sync`: it starts a sync in the background, says so while one runs, and waits
    for serve's warm-up (which syncs by itself) before it starts anything; with no schedule too."""
    entered, release, done = threading.Event(), threading.Event(), threading.Event()
    runs = []

    def sync() -> None:
        runs.append(1)
        entered.set()
        assert release.wait(30)
        done.set()

    heard: list[bool] = []
    told = threading.Event()

    def then(ok: bool) -> None:
        heard.append(ok)
        told.set()

    sched = SyncSchedule(make_trigger(0, None))
    assert sched.run_now("U1", then) is SyncNow.NOT_READY and runs == []
    sched.start(sync)
    try:
        assert sched.run_now("U1", then) is SyncNow.STARTED
        assert entered.wait(30)
        assert sched.run_now("U2", then) is SyncNow.RUNNING  # the one under way is what U2 gets
        assert heard == []  # nobody is told before it ends
        release.set()
        assert done.wait(30) and told.wait(30)
    finally:
        sched.shutdown()
    assert runs == [1] and heard == [True, True]  # one sync; both askers told how it went


def test_a_sync_asked_for_now_that_fails_says_so() -> None:
    told = threading.Event()
    heard: list[bool] = []

    def broken() -> None:
        raise RuntimeError("drive unmounted")

    sched = SyncSchedule(None)
    sched.start(broken)
    try:
        assert sched.run_now("U1", lambda ok: (heard.append(ok), told.set())) is SyncNow.STARTED
        assert told.wait(30)
    finally:
        sched.shutdown()
    assert heard == [False]


def test_cron_wins_over_interval_and_a_bad_one_is_a_clear_error() -> None:
    assert isinstance(make_trigger(15, "*/10 7-19 * * 1-5"), CronTrigger)
    assert make_trigger(0, None) is None
    with pytest.raises(ConfigError, match="not a crontab expression"):
        make_trigger(15, "every ten minutes")


def test_the_schedule_runs_in_the_zone_tz_names_and_a_bad_tz_is_a_settings_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TZ", "Europe/Copenhagen")
    trigger = make_trigger(0, "0 6 * * *")
    assert isinstance(trigger, CronTrigger) and str(trigger.timezone) == "Europe/Copenhagen"
    monkeypatch.setenv("TZ", "UTC")  # read again, not a zone cached from before
    assert str(make_trigger(15, None).timezone) == "UTC"  # type: ignore[union-attr]
    monkeypatch.setenv("TZ", "Europe/Copenhagn")
    with pytest.raises(ConfigError, match=r"^TZ: 'Europe/Copenhagn' is not a time zone"):
        make_trigger(15, None)
    assert make_trigger(0, None) is None  # no schedule: no zone needed


def test_a_sync_asked_for_that_finds_another_running_hears_how_that_one_went() -> None:
    """The job of a `/ask sync` may start just after a scheduled sync began: it does not run a
    second one, and its asker hears, when that one ends, how it went (here: it failed)."""
    entered, release = threading.Event(), threading.Event()
    heard: list[bool] = []
    told = threading.Event()
    runs = []

    def sync() -> None:
        runs.append(1)
        entered.set()
        assert release.wait(30)
        raise RuntimeError("drive unmounted")

    sched = SyncSchedule(None)
    sched.start(sync)
    try:
        assert sched.run_now("U1") is SyncNow.STARTED and entered.wait(30)
        # What the scheduler does with a `/ask sync` job queued just before that one began:
        sched._run("sync asked for by U2", lambda ok: (heard.append(ok), told.set()))
        assert heard == [] and runs == [1]  # returned at once: nothing ran, nobody told yet
        release.set()
        assert told.wait(30)
    finally:
        sched.shutdown()
    assert heard == [False] and runs == [1]
