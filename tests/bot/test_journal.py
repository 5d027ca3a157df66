"""The question journal: durable across processes, and what a new process does with it."""

from __future__ import annotations

import json
import sqlite3
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


def test_a_message_is_journaled_once_whichever_process_or_replica_is_handed_it_again(tmp_path: Path) -> None:
    q = Question("C1", "12.1", "12.1", "How fast?", "U1")
    first = Journal(tmp_path, owner="replica-a").record(q)
    assert first is not None
    assert Journal(tmp_path, owner="replica-b").record(q) is None  # a retry, on another replica or after a restart
    Journal(tmp_path).done(first)
    assert Journal(tmp_path).record(q) is None  # answered already: still not again
    assert Journal(tmp_path).record(Question("C2", "12.1", "12.1", "How fast?", "U1")) is not None  # another channel


def test_replicas_sharing_a_journal_answer_their_own_and_adopt_only_a_gone_ones(tmp_path: Path) -> None:
    a, b = Journal(tmp_path, owner="replica-a"), Journal(tmp_path, owner="replica-b")
    a.beat(now=1000.0)
    b.beat(now=1000.0)
    mine = a.record(Question("C1", "1.1", "1.1", "Who is on call?", "U1"), now=1000.0)
    theirs = b.record(Question("C1", "2.1", "2.1", "Where is the runbook?", "U2"), now=1000.0)
    # A restarts while B is answering: A owes its own question, never B's.
    assert [(j.id, adopted) for j, adopted in a.owed(now=1010.0)] == [(mine.id, False)]
    assert b.owed(now=1010.0, others_only=True) == []
    # B goes silent: after DEAD_AFTER_S its question is adopted, by one replica only.
    a.beat(now=1070.0)
    ((adopted, was_adopted),) = a.owed(now=1070.0, others_only=True)
    assert adopted.id == theirs.id and was_adopted and adopted.question.text == "Where is the runbook?"
    assert b.owed(now=1071.0) == [] and a.owed(now=1071.0, others_only=True) == []  # now A's own
    assert {j.id for j, _ in a.owed(now=1071.0)} == {mine.id, theirs.id}


def test_a_journal_from_before_owners_were_kept_is_read_and_owed(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "slack_journal.sqlite3")
    db.executescript(
        "CREATE TABLE questions (id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL, thread_ts TEXT NOT NULL,"
        " ts TEXT NOT NULL, text TEXT NOT NULL, user TEXT NOT NULL, is_dm INTEGER NOT NULL, folders TEXT,"
        " placeholder_ts TEXT, created_at REAL NOT NULL, done_at REAL);"
        "INSERT INTO questions (channel, thread_ts, ts, text, user, is_dm, created_at)"
        " VALUES ('C1', '1.1', '1.1', 'Old question?', 'U1', 0, 900.0);"
    )
    db.commit()
    db.close()
    j = Journal(tmp_path, owner="replica-a")
    ((job, adopted),) = j.owed(now=1000.0)
    assert job.question.text == "Old question?" and adopted
    assert [(x.id, a) for x, a in j.owed(now=1001.0)] == [(job.id, False)]


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
