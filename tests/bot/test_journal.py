"""The question journal: durable across processes, and what a new process does with it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from slack_sdk import WebClient

from bot.delivery import TOO_OLD
from bot.journal import Journal
from bot.question import Question
from testkit.slack import FakeSlack
from tests.bot import test_slack_app
from tests.bot.test_slack_app import ANSWERABLE, Scripted

harness_factory = test_slack_app.harness_factory  # the real Bolt app over a fake Web API


def test_an_unfinished_question_is_still_there_after_reopening(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    q = Question("C1", "10.1", "10.2", "How fast?", "U1", is_dm=True, folders=("hr", "policies"))
    job = j.record(q, now=1000.0)
    j.placed(job, "1700000000.000001")
    other = j.record(Question("C2", "11.1", "11.1", "Where?", "U2"))
    j.done(other)
    j.close()

    again = Journal(tmp_path)
    (left,) = again.unfinished()
    assert left.question == q and left.placeholder_ts == "1700000000.000001" and left.created_at == 1000.0
    again.done(left)
    assert again.unfinished() == []
    assert Journal(tmp_path).unfinished() == []


def _placeholder(slack: FakeSlack, thread: str) -> str:
    """A placeholder a previous process posted (as the bot) in ``thread``."""
    client = WebClient(token="xoxb-old", base_url=slack.url)
    return str(client.chat_postMessage(channel="C1", thread_ts=thread, text="Looking through the docs…")["ts"])


def test_a_new_process_answers_what_is_owed_and_apologises_for_what_is_too_old(
    harness_factory: Any, tmp_path: Path
) -> None:
    slack = FakeSlack()
    try:
        data = tmp_path / "data"
        j = Journal(data)
        jobs = {}
        for name, thread, age in (("fresh", "20.1", 60.0), ("old", "21.1", 7200.0), ("answered", "22.1", 60.0)):
            slack.user_message("C1", thread, f"<@UBOT> {ANSWERABLE}")
            job = j.record(Question("C1", thread, thread, ANSWERABLE, "U1"), now=time.time() - age)
            j.placed(job, _placeholder(slack, thread))
            jobs[name] = job
        # The "answered" one got its final message just before the process stopped.
        WebClient(token="x", base_url=slack.url).chat_update(
            channel="C1", ts=jobs["answered"].placeholder_ts, text="done", blocks=[{"type": "divider"}]
        )
        j.close()

        model = Scripted()
        h = harness_factory(model, data=data, slack=slack)
        assert h.bot.intake.recover(max_age_s=3600) == (1, 1)
        assert h.bot.drain(60)
        by_ts = {f["ts"]: f for f in slack.finals() if f["text"] != "done"}
        assert set(by_ts) == {jobs["fresh"].placeholder_ts, jobs["old"].placeholder_ts}
        assert "[1]" in json.dumps(by_ts[jobs["fresh"].placeholder_ts]["blocks"])
        assert by_ts[jobs["old"].placeholder_ts]["text"] == TOO_OLD and "ask again" in TOO_OLD
        assert len(model.prompts) == 1  # neither the old nor the answered one reached the model
        assert h.bot.journal.unfinished() == []
    finally:
        slack.close()


def test_a_question_with_no_placeholder_is_answered_in_a_new_reply(harness_factory: Any, tmp_path: Path) -> None:
    slack = FakeSlack()
    try:
        data = tmp_path / "data"
        slack.user_message("C1", "30.1", f"<@UBOT> {ANSWERABLE}")
        Journal(data).record(Question("C1", "30.1", "30.1", ANSWERABLE, "U1"))  # killed before the placeholder
        h = harness_factory(Scripted(), data=data, slack=slack)
        assert h.bot.intake.recover(max_age_s=3600) == (1, 0)
        (final,) = h.finals(expect=1)
        assert final["thread_ts"] == "30.1" and "[1]" in json.dumps(final["blocks"])
    finally:
        slack.close()
