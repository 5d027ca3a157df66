"""Stopping the intake: bounded by the grace period, and nothing it did not finish is lost."""

from __future__ import annotations

import threading
import time
from typing import Any

from bot.delivery import RESTARTING
from bot.intake import thanks
from retrieval.models.llm import Message, OnToken
from testkit.slack import FakeSlack
from tests.bot import test_slack_app
from tests.bot.test_slack_app import ANSWERABLE, Scripted

harness_factory = test_slack_app.harness_factory  # the real Bolt app over a fake Web API


class Hung(Scripted):
    """A model that does not answer until released (a dead model server, a stuck process)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.release = threading.Event(), threading.Event()

    def complete(self, messages: list[Message], max_tokens: int, on_token: OnToken | None = None, **_: object) -> str:
        self.entered.set()
        self.release.wait(60)
        return super().complete(messages, max_tokens, on_token)


def test_closing_waits_only_the_grace_period_and_leaves_the_rest_in_the_journal(harness_factory: Any) -> None:
    model = Hung()
    h = harness_factory(model)
    try:
        h.mention(ANSWERABLE, ts="50.1")
        h.mention(ANSWERABLE, ts="50.2")  # queued behind the hung one
        assert model.entered.wait(30)
        assert h.slack.wait_for(lambda s: len(s.of("chat.postMessage")) == 2, 30)
        t0 = time.monotonic()
        assert h.bot.intake.close(grace_s=0.5) is False  # the hung answer is still running
        assert time.monotonic() - t0 < 5
        assert sorted(j.question.ts for j in h.bot.journal.unfinished()) == ["50.1", "50.2"]
    finally:
        model.release.set()


def test_a_question_arriving_while_closing_is_journaled_for_the_next_start(harness_factory: Any) -> None:
    model = Scripted()
    h = harness_factory(model)
    assert h.bot.intake.close(grace_s=1)
    h.mention(ANSWERABLE, ts="51.1")

    def journaled(s: FakeSlack) -> bool:  # the placeholder is posted, then written to the journal
        posted = [p["_ts"] for p in s.of("chat.postMessage")]
        return bool(posted) and [j.placeholder_ts for j in h.bot.journal.unfinished()] == posted

    assert h.slack.wait_for(journaled, 10)
    (placeholder,) = h.slack.of("chat.postMessage")
    assert placeholder["text"] == RESTARTING
    (left,) = h.bot.journal.unfinished()
    assert left.question.ts == "51.1" and left.placeholder_ts == placeholder["_ts"]
    assert h.bot.intake.pending == 0 and model.prompts == []


def test_a_thank_you_is_told_from_a_question() -> None:
    said_only = ("thanks!", "Thank you so much", "ok", "great, thanks", "mange tak", "Tak skal du have!", "got it")
    for said in (*said_only, "good to know", "det er godt", "understood"):
        assert thanks(said), said
    for asked in (
        "ok so how many days?",
        "thanks, and for SEV2?",
        "is the SEV1 page ok",
        "it",
        "you",
        "",
        "thanks " * 9,
        "good to know the limit",
        "ok thanks how about SEV2",
    ):
        assert not thanks(asked), asked
