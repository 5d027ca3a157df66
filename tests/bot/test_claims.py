"""First-delivery checks: local memory, a shared claim, and a claim store that fails."""

from __future__ import annotations

import threading

from bot.claims import FirstDelivery


def test_an_id_is_first_once() -> None:
    first = FirstDelivery()
    assert first.first("Ev1") is True
    assert first.first("Ev1") is False
    assert first.first("Ev2") is True


def test_an_id_claimed_by_another_replica_is_not_ours_and_not_asked_again() -> None:
    asked: list[str] = []

    def shared(key: str) -> bool:
        asked.append(key)
        return key != "EvTHEIRS"

    first = FirstDelivery(shared)
    assert first.first("EvTHEIRS") is False and first.first("EvTHEIRS") is False
    assert first.first("EvMINE") is True and first.first("EvMINE") is False
    assert asked == ["EvTHEIRS", "EvMINE"]


def test_a_failing_claim_store_does_not_drop_the_event() -> None:
    calls = 0

    def down(key: str) -> bool:
        nonlocal calls
        calls += 1
        raise ConnectionError("chroma is down")

    first = FirstDelivery(down)
    assert first.first("Ev1") is True  # answered here rather than lost
    assert first.first("Ev1") is False  # and then remembered, so Slack's retry is not answered twice
    assert calls == 1


def test_a_retry_arriving_while_the_claim_is_asked_is_not_answered_twice() -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(key: str) -> bool:
        entered.set()
        assert release.wait(10)
        return True

    first = FirstDelivery(slow)
    got: list[bool] = []
    t = threading.Thread(target=lambda: got.append(first.first("Ev1")))
    t.start()
    assert entered.wait(10)
    assert first.first("Ev1") is False  # the same id, while the first delivery's claim is in flight
    release.set()
    t.join(10)
    assert got == [True]


def test_the_local_memory_is_bounded() -> None:
    first = FirstDelivery(size=3)
    for i in range(5):
        assert first.first(f"Ev{i}")
    assert first.first("Ev0") is True  # forgotten (Slack retries within minutes, not thousands of events)
    assert first.first("Ev4") is False
