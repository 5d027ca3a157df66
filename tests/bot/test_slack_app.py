"""The real Bolt app in HTTP mode, fed signed requests, talking to a fake Slack Web API."""

from __future__ import annotations

import json
import logging
import re
import shutil
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.builder import SlackOptions, build_slack_bot
from bot.gaps import GapRecord
from bot.health import Health, index_health
from bot.http_server import SlackEvents, make_server
from bot.i18n import say
from bot.intake import NOT_HERE
from bot.metrics import Metrics
from bot.scheduler import SyncNow, SyncSchedule
from bot.scoping import ChannelScopes
from bot.slack_app import ASKED_BEFORE, SYNC_SAID, SYNCED
from retrieval.answer import Linker, LinkSigner, Outcome
from retrieval.answer.service import AnswerService
from retrieval.errors import ModelError, StoreUnreachable
from retrieval.index import RECORDS, SqliteRecords
from retrieval.learn import LearnedPairs
from retrieval.models.llm import LanguageModel, Message, OnToken
from retrieval.search import Languages
from retrieval.search.engine import Engine
from retrieval.search.gate import GateConfig
from testkit.fakes import UnreachableRecords, memory_engine
from testkit.slack import FakeSlack, signed_post
from tests.conftest import EXAMPLES

SECRET = "test-signing-secret"
ANSWERABLE = "How fast must a SEV1 page be acknowledged?"
UNSURE = "got paged for a sev1, how long until I have to ack it?"  # the gate signal 0.95: pointed at
GATE = GateConfig(0.70, point=1.0)


class Scripted:
    """A model that answers (or raises) from a script: one outcome per call, the last one repeats."""

    name = "scripted"
    supports_grammar = False  # free text, like a server without grammar support

    def __init__(
        self, reply: str = "Within 5 minutes [1].", fail: bool = False, script: list[str | Exception] | None = None
    ) -> None:
        self.script: list[str | Exception] = script or [ModelError("the model process crashed") if fail else reply]
        self.prompts: list[str] = []
        self.lock = threading.Lock()

    def complete(self, messages: list[Message], max_tokens: int, on_token: OnToken | None = None, **_: object) -> str:
        with self.lock:
            self.prompts.append(messages[-1]["content"])
            outcome = self.script[min(len(self.prompts), len(self.script)) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


# As `serve` builds them with FOOTNOTE_PUBLIC_URL set: signed links to the viewer.
VIEWER = Linker(docs_dir=EXAMPLES, viewer_url="https://footnote.example", sign=LinkSigner(b"k" * 32, 3600).sign)


class Harness:
    def __init__(
        self,
        engine: Engine,
        model: LanguageModel,
        data: Path,
        slack: FakeSlack | None = None,
        links: Linker = VIEWER,
        **bot_kw: Any,
    ) -> None:
        self.slack = slack or FakeSlack()
        self.owns_slack = slack is None
        # Thresholds a calibrated drive like this one might have: the direct questions are answered,
        # the chatty SEV1 page is pointed at, a passport is refused.
        self.learned = LearnedPairs(SqliteRecords(data / RECORDS, "learned"))
        svc = AnswerService(engine.searcher, lambda: model, GATE, links=links, learned=self.learned)
        bot_kw.setdefault("status", lambda folders: index_health(engine.manifest, engine.last_sync, folders=folders))
        self.bot = build_slack_bot(svc, "xoxb-test", SECRET, data, api_url=self.slack.url, **bot_kw)
        self.server = make_server(("127.0.0.1", 0), lambda: {"ok": True}, slack=SlackEvents(self.bot.app, SECRET))
        self.server.start()
        self.url = f"{self.server.url}/slack/events"
        self._n = 0

    def post(
        self, body: str, ctype: str, headers: dict[str, str] | None = None, secret: str = SECRET, age: int = 0
    ) -> int:
        return self.exchange(body, ctype, headers, secret, age)[0]

    def exchange(
        self, body: str, ctype: str, headers: dict[str, str] | None = None, secret: str = SECRET, age: int = 0
    ) -> tuple[int, str]:
        return signed_post(self.url, body, ctype, secret, headers, age)

    def event(
        self, event: dict[str, Any], event_id: str | None = None, headers: dict[str, str] | None = None, **kw: Any
    ) -> int:
        """Deliver ``event``; a person's message is also put where conversations.replies finds it."""
        self._n += 1
        if event.get("type") in ("app_mention", "message") and event.get("user") and not event.get("bot_id"):
            self.slack.user_message(
                event["channel"], event["ts"], event.get("text", ""), event["user"], event.get("thread_ts")
            )
        body = {
            "token": "x",
            "team_id": "T1",
            "api_app_id": "A1",
            "type": "event_callback",
            "event_id": event_id or f"Ev{self._n:05d}",
            "event_time": int(time.time()),
            "authorizations": [{"team_id": "T1", "user_id": "UBOT", "is_bot": True}],
            "event": event,
        }
        return self.post(json.dumps(body), "application/json", headers, **kw)

    def mention(self, text: str, ts: str, thread_ts: str | None = None, channel: str = "C1", **kw: Any) -> int:
        ev = {
            "type": "app_mention",
            "user": "U1",
            "text": f"<@UBOT> {text}",
            "ts": ts,
            "channel": channel,
            "event_ts": ts,
        }
        if thread_ts:
            ev["thread_ts"] = thread_ts
        return self.event(ev, **kw)

    def follow_up(self, text: str, ts: str, thread_ts: str, channel: str = "C1", user: str = "U1") -> int:
        ev = {
            "type": "message",
            "channel_type": "channel",
            "user": user,
            "text": text,
            "ts": ts,
            "thread_ts": thread_ts,
            "channel": channel,
        }
        return self.event(ev)

    def command(self, text: str) -> int:
        return self.command_exchange(text)[0]

    def command_exchange(self, text: str, channel: str = "C1") -> tuple[int, str]:
        form = {
            "command": "/ask",
            "text": text,
            "user_id": "U1",
            "channel_id": channel,
            "team_id": "T1",
            "trigger_id": "tr1",
            "response_url": self.slack.response_url,
        }
        return self.exchange(urllib.parse.urlencode(form), "application/x-www-form-urlencoded")

    def finals(self, expect: int | None = None) -> list[dict[str, Any]]:
        """Every final reply (it carries blocks; streaming updates do not); with ``expect``,
        wait until that many have arrived."""
        if expect is not None:
            assert self.slack.wait_for(lambda s: len(s.finals()) >= expect, 120), f"expected {expect} final replies"
        assert self.bot.drain(120)
        return self.slack.finals()

    def settle(self) -> None:
        """Every delivery so far has been handled: a sentinel question, sent last, has its
        answer (the one worker answers in order, and a wrongly accepted delivery would have
        been queued before it)."""
        before = len(self.slack.finals())
        self._n += 1
        self.mention("How do I claim travel expenses? (sentinel)", ts=f"999.{self._n}", channel="CSENTINEL")
        self.finals(expect=before + 1)

    def close(self) -> None:
        self.server.stop()
        self.bot.intake.close(5)
        if self.owns_slack:
            self.slack.close()


@pytest.fixture
def harness_factory(examples_engine: Engine, tmp_path: Path) -> Iterator[Any]:
    made: list[Harness] = []

    def make(model: LanguageModel, data: Path | None = None, **bot_kw: Any) -> Harness:
        h = Harness(examples_engine, model, data or tmp_path / "data", **bot_kw)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()


def _not_sentinel(finals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in finals if f["channel"] != "CSENTINEL"]


def _text_of(update: dict[str, Any]) -> str:
    return json.dumps(update.get("blocks") or []) + update.get("text", "")


def test_mention_is_answered_in_its_thread_with_char_links(harness_factory: Any) -> None:
    h = harness_factory(Scripted())
    assert h.mention(ANSWERABLE, ts="100.1") == 200
    (final,) = h.finals(expect=1)
    first = h.slack.of("chat.postMessage")[0]
    assert first["thread_ts"] == "100.1" and "Looking through the docs" in first["text"] and not first.get("blocks")
    assert final["ts"] == first["_ts"]  # the placeholder is updated in place
    body = _text_of(final)
    assert "#char=" in body and "[1]" in body and "Sources" in body
    assert "<https://footnote.example/view/on-call.md?from=" in body  # the signed viewer link


def test_without_a_public_url_citations_carry_no_link_and_never_a_file_path(harness_factory: Any) -> None:
    h = harness_factory(Scripted(), links=Linker(docs_dir=EXAMPLES))  # no FOOTNOTE_PUBLIC_URL, no drive URL
    assert h.mention(ANSWERABLE, ts="150.1") == 200
    (final,) = h.finals(expect=1)
    body = json.dumps(h.slack.calls)  # everything sent to Slack
    assert "file:" not in body and str(EXAMPLES) not in body and "<http" not in _text_of(final)
    assert "[1] *On-call Handbook" in _text_of(final) and "Sources" in _text_of(final)  # named, and quoted


def test_out_of_domain_question_gets_a_visible_refusal(harness_factory: Any) -> None:
    model = Scripted()
    h = harness_factory(model)
    h.mention("How do I renew my Spanish passport?", ts="101.1")
    (final,) = h.finals(expect=1)
    assert "couldn't find this in the docs" in _text_of(final)
    assert model.prompts == []


def test_a_retried_delivery_never_produces_a_second_answer(harness_factory: Any) -> None:
    h = harness_factory(Scripted())
    assert h.mention(ANSWERABLE, ts="102.1", event_id="EvSAME") == 200
    retry = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    assert h.mention(ANSWERABLE, ts="102.1", event_id="EvSAME", headers=retry) == 200
    assert h.mention(ANSWERABLE, ts="102.1", event_id="EvSAME") == 200  # the same id without the header
    h.settle()
    assert len(_not_sentinel(h.finals())) == 1
    assert [p["thread_ts"] for p in h.slack.of("chat.postMessage") if p["channel"] == "C1"] == ["102.1"]


def test_a_retry_that_reaches_a_restarted_process_is_not_answered_again(harness_factory: Any, tmp_path: Path) -> None:
    """Slack retries a delivery it got no 200 for within 3 s, and a restart (a deploy) can fall
    between the first delivery and the retry: the new process has no memory of the event, but
    the journal it shares with the old one knows the question."""
    data = tmp_path / "data"
    before = harness_factory(Scripted(), data=data)
    assert before.mention(ANSWERABLE, ts="107.1", event_id="EvRESTART") == 200
    before.finals(expect=1)
    after = harness_factory(Scripted(), data=data, slack=before.slack)  # the next process, on the same data dir
    retry = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    assert after.mention(ANSWERABLE, ts="107.1", event_id="EvRESTART", headers=retry) == 200
    after.settle()
    assert len([f for f in after.finals() if f["channel"] == "C1"]) == 1
    assert [p["thread_ts"] for p in after.slack.of("chat.postMessage") if p["channel"] == "C1"] == ["107.1"]


def test_an_event_is_answered_when_the_shared_claim_store_fails(harness_factory: Any) -> None:
    def claim_store_down(key: str) -> bool:
        raise ConnectionError("chroma is down")

    h = harness_factory(Scripted(), first_delivery=claim_store_down)
    assert h.mention(ANSWERABLE, ts="105.1", event_id="EvDOWN") == 200
    (final,) = h.finals(expect=1)
    assert "[1]" in _text_of(final)
    # Now it is answered here, so Slack's retry of it is not answered again.
    assert h.mention(ANSWERABLE, ts="105.1", event_id="EvDOWN", headers={"X-Slack-Retry-Num": "1"}) == 200
    h.settle()
    assert len(_not_sentinel(h.finals())) == 1


def test_an_event_another_replica_claimed_is_not_answered(harness_factory: Any) -> None:
    h = harness_factory(Scripted(), first_delivery=lambda key: key != "EvTHEIRS")
    h.mention(ANSWERABLE, ts="106.1", event_id="EvTHEIRS")
    h.settle()
    assert _not_sentinel(h.finals()) == [] and not [p for p in h.slack.of("chat.postMessage") if p["channel"] == "C1"]


def test_bad_or_stale_signature_is_rejected(harness_factory: Any) -> None:
    h = harness_factory(Scripted())
    assert h.mention(ANSWERABLE, ts="103.1", secret="wrong-secret") == 401
    assert h.mention(ANSWERABLE, ts="103.2", age=3600) == 401
    assert h.slack.of("chat.postMessage") == []


def test_a_failing_model_still_shows_the_passages_a_crash_is_a_visible_error_and_the_next_is_answered(
    harness_factory: Any,
) -> None:
    down = ModelError(
        "the model server at http://llm:8080 is not reachable or did not answer; answers resume when it is back"
    )
    h = harness_factory(Scripted(script=[down, RuntimeError("boom"), "Within 5 minutes [1]."]))
    finals = []
    for i in range(3):  # one at a time: the script's order is the answering order
        h.mention(ANSWERABLE, ts=f"104.{i + 1}")
        finals.append(h.finals(expect=i + 1)[-1])
    first, second, third = finals
    assert "couldn't write an answer just now" in first["text"]  # said so, and not as "not sure"
    assert ACK in _text_of(first) and "not an answer" in _text_of(first)  # the passage that answers it
    assert "Something went wrong" in second["text"] and "boom" in second["text"]
    assert "[1]" in _text_of(third) and "Sources" in _text_of(third)
    assert h.bot.intake.pending == 0


def test_a_burst_of_fifty_questions_gets_fifty_replies(harness_factory: Any) -> None:
    h = harness_factory(Scripted())
    for i in range(50):
        assert h.mention(f"{ANSWERABLE} ({i})", ts=f"200.{i:02d}") == 200
    finals = h.finals(expect=50)
    assert len(finals) == 50
    placeholders = h.slack.of("chat.postMessage")
    assert sorted(p["thread_ts"] for p in placeholders) == sorted(f"200.{i:02d}" for i in range(50))
    assert {f["ts"] for f in finals} == {p["_ts"] for p in placeholders}  # each placeholder got its answer
    assert any("queued behind" in p["text"] for p in placeholders)
    assert h.bot.intake.pending == 0
    assert h.bot.journal.unfinished() == []


def test_a_failed_placeholder_post_still_gets_an_answer_and_frees_the_queue(harness_factory: Any) -> None:
    h = harness_factory(Scripted())
    h.slack.fail("chat.postMessage", "internal_error", times=1)  # the placeholder post fails
    h.mention(ANSWERABLE, ts="110.1")
    (final,) = h.finals(expect=1)
    assert final["thread_ts"] == "110.1" and "[1]" in _text_of(final)  # a new reply instead
    assert h.bot.intake.pending == 0
    h.mention(ANSWERABLE, ts="111.1")
    h.finals(expect=2)
    placeholder = next(p for p in h.slack.of("chat.postMessage") if p["thread_ts"] == "111.1")
    assert "queued behind" not in placeholder["text"]  # nothing leaked from the failed post
    assert h.bot.journal.unfinished() == []


def test_slash_command_posts_the_question_and_answers_in_its_thread(harness_factory: Any) -> None:
    model = Scripted()
    h = harness_factory(model)
    assert h.command("How fast must a SEV1 page be acknowledged &amp; by <#C9|oncall>?") == 200  # as Slack sends it
    h.finals(expect=1)
    posts = h.slack.of("chat.postMessage")
    assert posts[0]["text"].endswith("asked: How fast must a SEV1 page be acknowledged &amp; by #oncall?")
    assert "thread_ts" not in posts[0] and posts[1]["thread_ts"] == posts[0]["_ts"]
    assert "acknowledged & by #oncall?" in model.prompts[-1]  # what the person typed reached the model


@pytest.mark.parametrize("error", ["not_in_channel", "channel_not_found"])
def test_ask_where_footnote_cannot_post_tells_the_asker_how_to_get_an_answer(harness_factory: Any, error: str) -> None:
    """`/ask` works in any channel, but Footnote can post only where it is a member: in a
    public channel it was never invited to Slack says "not_in_channel", in a private channel
    or someone else's direct message "channel_not_found". The asker is told so, privately."""
    h = harness_factory(Scripted())
    h.slack.fail("chat.postMessage", error, times=1)
    assert h.command(ANSWERABLE) == 200
    assert h.slack.wait_for(lambda s: bool(s.of("response")), 30)
    (told,) = h.slack.of("response")
    assert told["response_type"] == "ephemeral" and "/invite @Footnote" in told["text"]
    h.settle()
    assert _not_sentinel(h.finals()) == [] and h.bot.journal.unfinished() == []  # nothing left half-asked


def test_ask_whose_post_fails_otherwise_is_a_visible_error(harness_factory: Any) -> None:
    h = harness_factory(Scripted())
    h.slack.fail("chat.postMessage", "is_archived", times=1)
    assert h.command(ANSWERABLE) == 200
    assert h.slack.wait_for(lambda s: bool(s.of("response")), 30)
    (told,) = h.slack.of("response")
    assert told["response_type"] == "ephemeral" and "is_archived" in told["text"]


def test_a_message_with_a_file_or_sent_to_the_channel_too_is_answered_and_an_edit_is_not(
    harness_factory: Any,
) -> None:
    """Slack marks a person's message with a subtype when it carries a file ("file_share") or
    is a thread reply also sent to the channel ("thread_broadcast"): both are questions.
    An edit ("message_changed") is not asked again."""
    h = harness_factory(Scripted())
    dm = {"type": "message", "channel_type": "im", "user": "U1", "channel": "D1"}
    h.event({**dm, "subtype": "file_share", "text": ANSWERABLE, "ts": "310.1", "files": [{"id": "F1"}]})
    h.finals(expect=1)
    h.mention(ANSWERABLE, ts="311.1")
    h.finals(expect=2)
    follow = {"type": "message", "channel_type": "channel", "user": "U1", "channel": "C1", "thread_ts": "311.1"}
    h.event({**follow, "subtype": "thread_broadcast", "text": "and within 30 minutes?", "ts": "311.5"})
    h.finals(expect=3)
    edited = {**dm, "ts": "310.1", "text": ANSWERABLE + " (edited)"}
    h.event({**dm, "subtype": "message_changed", "message": edited, "ts": "312.1"})
    h.settle()
    assert len(_not_sentinel(h.finals())) == 3


def test_a_thank_you_gets_a_reaction_not_a_refusal(harness_factory: Any, tmp_path: Path) -> None:
    """ "thanks!" under an answer was asked as a question: "I couldn't find this in the docs",
    in the channel, and a gap in the team's report of what the docs don't answer."""
    gaps = GapRecord(tmp_path / "gaps.sqlite3")
    h = harness_factory(Scripted(), gaps=gaps)
    h.mention(ANSWERABLE, ts="330.1")
    h.finals(expect=1)
    for i, text in enumerate(("thanks! :pray:", "ok, thank you", "Perfekt, mange tak 👍", "got it, cheers")):
        h.follow_up(text, ts=f"330.{i + 2}", thread_ts="330.1")
    h.follow_up("thanks, and within 30 minutes?", ts="330.9", thread_ts="330.1")  # a question after all
    h.settle()
    assert len(_not_sentinel(h.finals())) == 2
    assert h.slack.wait_for(lambda s: len(s.of("reactions.add")) >= 4, 30)  # reacted in the handler, after its ack
    assert sorted((r["timestamp"], r["name"]) for r in h.slack.of("reactions.add")) == [
        (f"330.{i}", "+1") for i in range(2, 6)
    ]
    asked = [a.question for a in gaps.asked()]
    assert "thanks, and within 30 minutes?" in asked and not [q for q in asked if "thank you" in q or "tak" in q]


def test_direct_message_and_follow_up_in_a_thread_use_context(harness_factory: Any) -> None:
    model = Scripted()
    h = harness_factory(model)
    h.event(
        {
            "type": "message",
            "channel_type": "im",
            "user": "U1",
            "text": "How do I claim travel expenses?",
            "ts": "300.1",
            "channel": "D1",
        }
    )
    h.finals(expect=1)
    h.mention(ANSWERABLE, ts="301.1")
    h.finals(expect=2)
    # A follow-up in the answered thread, without a fresh mention.
    h.follow_up("and what if I cannot resolve it within 30 minutes?", ts="301.5", thread_ts="301.1")
    assert len(h.finals(expect=3)) == 3
    assert "Earlier question in this conversation: " + ANSWERABLE in model.prompts[-1]
    # Messages from bots, outside threads, and in threads Footnote never replied in are ignored.
    h.event(
        {
            "type": "message",
            "channel_type": "channel",
            "bot_id": "B2",
            "text": "bot chatter",
            "ts": "302.1",
            "thread_ts": "301.1",
            "channel": "C1",
        }
    )
    h.event(
        {
            "type": "message",
            "channel_type": "channel",
            "user": "U2",
            "text": "random talk",
            "ts": "303.1",
            "channel": "C1",
        }
    )
    h.slack.user_message("C1", "304.1", "a thread between people")
    h.follow_up("what do you think?", ts="304.2", thread_ts="304.1", user="U2")
    h.settle()
    assert len(_not_sentinel(h.finals())) == 3
    assert h.slack.of("chat.postMessage")[0]["thread_ts"] == "300.1"


def test_a_follow_up_reaching_a_fresh_process_or_another_replica_has_its_context(
    harness_factory: Any, tmp_path: Path
) -> None:
    slack = FakeSlack()
    try:
        first = harness_factory(Scripted(), data=tmp_path / "one", slack=slack)
        first.mention(ANSWERABLE, ts="320.1")
        first.finals(expect=1)
        first.close()  # the process that answered is gone; Slack still has the thread
        model = Scripted()
        fresh = harness_factory(model, data=tmp_path / "two", slack=slack)
        fresh.follow_up("and what if I cannot resolve it within 30 minutes?", ts="320.5", thread_ts="320.1")
        fresh.finals(expect=2)
        placeholder = slack.of("chat.postMessage")[-1]
        assert placeholder["thread_ts"] == "320.1" and slack.finals()[-1]["ts"] == placeholder["_ts"]
        assert model.prompts and "Earlier question in this conversation: " + ANSWERABLE in model.prompts[-1]
    finally:
        slack.close()


def test_a_question_under_another_bots_alert_is_asked_with_the_alert_as_context(harness_factory: Any) -> None:
    model = Scripted()
    h = harness_factory(model)
    alert = {"type": "message", "subtype": "bot_message", "bot_id": "BALERT", "text": "", "ts": "125.1",
             "attachments": [{"fallback": "[FIRING] billing-worker: error code LW-5012"}]}  # fmt: skip
    h.slack.messages.setdefault("C1", []).append(alert)
    h.mention("what do I do about this?", ts="125.2", thread_ts="125.1")
    h.finals(expect=1)
    assert any(
        "Earlier question in this conversation: [FIRING] billing-worker: error code LW-5012" in p for p in model.prompts
    )


def test_thread_context_is_read_from_the_last_messages_within_a_budget(harness_factory: Any, tmp_path: Path) -> None:
    slack = FakeSlack()
    try:
        first = harness_factory(Scripted(), data=tmp_path / "one", slack=slack)
        first.mention(ANSWERABLE, ts="330.100")
        first.finals(expect=1)
        for i in range(8):  # earlier follow-ups, each long
            slack.user_message(
                "C1",
                f"330.{101 + i}",
                f"earlier question {i} " + "about the SEV1 on-call page escalation " * 3,
                thread_ts="330.100",
            )
        wide = Scripted()
        h = harness_factory(wide, data=tmp_path / "two", slack=slack, options=SlackOptions(thread_messages=5))
        question = "and what if I cannot resolve it within 30 minutes?"
        h.follow_up(question, ts="330.200", thread_ts="330.100")
        h.finals(expect=2)
        assert _earlier(wide.prompts[-1]) == [3, 4, 5, 6, 7]  # the last five messages, oldest first
        narrow = Scripted()
        h = harness_factory(
            narrow, data=tmp_path / "three", slack=slack, options=SlackOptions(thread_context_chars=300)
        )
        h.follow_up("and who is paged second?", ts="330.300", thread_ts="330.100")
        h.finals(expect=3)
        prompt = narrow.prompts[-1]
        assert prompt.rstrip().endswith("QUESTION\nand who is paged second?")  # whole, and last
        # 300 characters: the question, the follow-up just before it and one more (each ~130).
        assert "Earlier question in this conversation: " + question in prompt and _earlier(prompt) == [7]
    finally:
        slack.close()


def _earlier(prompt: str) -> list[int]:
    """The numbers of the padded earlier questions the prompt carries as context."""
    return [int(m) for m in re.findall(r"Earlier question in this conversation: earlier question (\d+) ", prompt)]


def test_feedback_click_is_stored_and_acknowledged(harness_factory: Any, tmp_path: Path) -> None:
    h = harness_factory(Scripted())
    h.mention(ANSWERABLE, ts="400.1")
    (final,) = h.finals(expect=1)
    actions = next(b for b in final["blocks"] if b["type"] == "actions")
    value = actions["elements"][0]["value"]
    payload = {
        "type": "block_actions",
        "user": {"id": "U9"},
        "channel": {"id": "C1"},
        "team": {"id": "T1"},
        "api_app_id": "A1",
        "token": "x",
        "trigger_id": "t",
        "actions": [
            {"action_id": "feedback_up", "block_id": "feedback", "value": value, "type": "button", "action_ts": "1"}
        ],
    }
    assert h.post(urllib.parse.urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded") == 200
    assert h.slack.wait_for(lambda s: bool(s.of("chat.postEphemeral")), 10)
    rec = json.loads((tmp_path / "data" / "feedback.jsonl").read_text().splitlines()[0])
    assert rec["vote"] == "up" and rec["user"] == "U9" and rec["question"] == ANSWERABLE and rec["sources"]
    assert h.slack.of("chat.postEphemeral")[0]["user"] == "U9"


@pytest.mark.slow
def test_real_model_answer_through_slack(harness_factory: Any, real_model: LanguageModel) -> None:
    h = harness_factory(real_model)
    h.mention("What allowance do on-call engineers get per week?", ts="500.1")
    (final,) = h.finals(expect=1)
    body = _text_of(final)
    assert "couldn't find" not in body and "Something went wrong" not in body
    assert "#char=" in body


def test_ask_status_is_an_ephemeral_index_report_read_from_the_index(
    harness_factory: Any, examples_engine: Engine
) -> None:
    h = harness_factory(Scripted())
    status, body = h.command_exchange("status")
    assert status == 200
    reply = json.loads(body)
    indexed = len(examples_engine.manifest.all())
    assert f"{indexed} indexed · 0 failed · 0 stale" in reply["text"]
    assert reply.get("response_type", "ephemeral") == "ephemeral"
    assert h.slack.of("chat.postMessage") == []  # nothing posted to the channel, no model call


def test_ask_sync_reads_the_drive_now_and_tells_only_the_asker(harness_factory: Any) -> None:
    """`/ask sync` starts a sync in serve's schedule (not before its warm-up has started it),
    answers the asker privately in the word's language, and is never asked as a question."""
    synced = threading.Event()
    schedule = SyncSchedule(None)  # FOOTNOTE_SYNC_MINUTES=0: on demand only
    model = Scripted()
    h = harness_factory(model, sync_now=schedule.run_now)
    status, body = h.command_exchange("sync")
    assert status == 200 and body == say("en", SYNC_SAID[SyncNow.NOT_READY]) and not synced.is_set()
    schedule.start(synced.set)
    try:
        status, body = h.command_exchange("sync")
        assert status == 200 and body == say("en", SYNC_SAID[SyncNow.STARTED])
        assert synced.wait(30)
        assert h.slack.wait_for(lambda s: bool(s.of("response")), 30)  # then: done, privately
        (done,) = h.slack.of("response")
        assert done["text"] == say("en", SYNCED) and done["response_type"] == "ephemeral"
        status, body = h.command_exchange("Synk")  # Danish: told in Danish (started, or still running)
        assert status == 200 and body in {say("da", SYNC_SAID[w]) for w in (SyncNow.STARTED, SyncNow.RUNNING)}
        assert "Jeg siger til" in body  # either way, a Danish word was answered in Danish
    finally:
        schedule.shutdown()
    assert h.slack.of("chat.postMessage") == [] and model.prompts == []  # nothing posted, no model call


def _shortcut(h: Any, text: str, ts: str, channel: str = "C1", thread_ts: str | None = None) -> int:
    """ "Ask Footnote" chosen by U9 on a message U1 wrote (a message shortcut, as Slack sends it)."""
    message: dict[str, Any] = {"type": "message", "user": "U1", "text": text, "ts": ts}
    if thread_ts:
        message["thread_ts"] = thread_ts
    h.slack.user_message(channel, ts, text, "U1", thread_ts)
    payload = {
        "type": "message_action", "callback_id": "ask_footnote", "trigger_id": "t", "token": "x",
        "team": {"id": "T1"}, "user": {"id": "U9"}, "channel": {"id": channel, "name": "general"},
        "message": message, "message_ts": ts, "response_url": h.slack.response_url,
    }  # fmt: skip
    return int(h.post(urllib.parse.urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded"))


def test_ask_footnote_on_a_message_answers_it_in_its_thread_once(harness_factory: Any) -> None:
    """A question posted without asking Footnote gets somewhere: anyone may choose "Ask
    Footnote" on it, and the answer goes into that message's thread, once however often."""
    model = Scripted()
    h = harness_factory(model)
    assert _shortcut(h, ANSWERABLE, ts="450.1") == 200
    (final,) = h.finals(expect=1)
    (placeholder,) = [p for p in h.slack.of("chat.postMessage") if p.get("thread_ts") == "450.1"]
    assert final["ts"] == placeholder["_ts"] and final["channel"] == "C1" and "[1]" in _text_of(final)
    assert len(model.prompts) == 1
    assert _shortcut(h, ANSWERABLE, ts="450.1") == 200  # chosen again on the same message
    assert h.slack.wait_for(lambda s: bool(s.of("response")), 10)  # the chooser is told where its reply is
    (said,) = h.slack.of("response")
    assert said["text"] == say("en", ASKED_BEFORE) and said["response_type"] == "ephemeral"
    h.settle()
    assert len([p for p in h.slack.of("chat.postMessage") if p.get("thread_ts") == "450.1"]) == 1
    assert len(h.slack.finals()) == 2 and len(model.prompts) == 2  # the sentinel's, not a second answer


def test_ask_footnote_where_footnote_is_not_a_member_says_so_privately(harness_factory: Any) -> None:
    model = Scripted()
    h = harness_factory(model)
    h.slack.outside.add("CELSE")
    assert _shortcut(h, ANSWERABLE, ts="451.1", channel="CELSE") == 200
    assert h.slack.wait_for(lambda s: bool(s.of("response")), 10)
    (said,) = h.slack.of("response")
    assert "Invite me with `/invite @Footnote`" in said["text"] and said["response_type"] == "ephemeral"
    assert h.slack.of("chat.postMessage") == [] and model.prompts == []


def test_app_home_shows_index_health(harness_factory: Any, examples_engine: Engine) -> None:
    h = harness_factory(Scripted())
    assert h.event({"type": "app_home_opened", "user": "U7", "channel": "D7", "tab": "home", "event_ts": "1.2"}) == 200
    assert h.slack.wait_for(lambda s: bool(s.of("views.publish")), 10)
    (published,) = h.slack.of("views.publish")
    view = published["view"] if isinstance(published["view"], dict) else json.loads(published["view"])
    assert published["user_id"] == "U7" and view["type"] == "home"
    assert f"{examples_engine.manifest.totals()['chunks']} chunks" in json.dumps(view["blocks"])


def test_ask_status_and_the_home_tab_name_only_documents_in_the_channels_scope(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    for folder, name in (("engineering", "on-call.md"), ("hr", "time-off.txt")):
        (docs / folder).mkdir(parents=True)
        shutil.copy(EXAMPLES / name, docs / folder / name)
    (docs / "engineering" / "runbook-draft.md").write_bytes(b"")  # both fail: empty files
    (docs / "hr" / "layoffs-plan-2026.md").write_bytes(b"")
    engine = memory_engine(docs)
    engine.sync()
    scopes = ChannelScopes({"C1": ("engineering",), "dm": ("engineering",)}, frozenset({"CQUIET"}))
    h = Harness(engine, Scripted(), tmp_path / "data", scopes=scopes)
    try:
        everywhere = h.command_exchange("status", channel="CALL")[1]  # not mapped: the whole index
        assert "layoffs-plan-2026.md" in everywhere and "runbook-draft.md" in everywhere
        status, body = h.command_exchange("status")  # C1: engineering only
        reply = json.loads(body)
        assert status == 200 and "runbook-draft.md" in body and "layoffs" not in body and "hr/" not in body
        assert "1 indexed · 1 failed · 0 stale" in reply["text"] and "Index health in engineering/" in reply["text"]
        status, body = h.command_exchange("status", channel="CQUIET")  # excluded: nothing but the notice
        assert status == 200 and body == NOT_HERE
        h.event({"type": "app_home_opened", "user": "U7", "channel": "D7", "tab": "home", "event_ts": "1.2"})
        assert h.slack.wait_for(lambda s: bool(s.of("views.publish")), 10)
        home = json.dumps(h.slack.of("views.publish")[0]["view"])
        assert "runbook-draft.md" in home and "layoffs" not in home
    finally:
        h.close()


class Streaming(Scripted):
    """Writes its reply a few characters at a time, like a real model, with a broadcast
    and a link in it that must never reach Slack."""

    PIECES = ("Within ", "5 ", "minutes ", "<!channel> ", "see ", "http://evil.example ", "[1]", ".")

    def complete(self, messages: list[Message], max_tokens: int, on_token: OnToken | None = None, **_: object) -> str:
        assert on_token is not None
        for p in self.PIECES:
            on_token(p)
        return "".join(self.PIECES)


EVERY_TOKEN = SlackOptions(stream_interval_s=0.0)  # no throttle: every piece is shown, no timing involved


def test_the_answer_streams_into_slack_while_the_model_writes(harness_factory: Any) -> None:
    slack = FakeSlack()
    try:
        h = harness_factory(Streaming(), slack=slack, options=EVERY_TOKEN)
        h.mention(ANSWERABLE, ts="600.1")
        (final,) = h.finals(expect=1)
        (placeholder,) = slack.of("chat.postMessage")
        (start,) = slack.of("chat.startStream")
        assert (
            start["thread_ts"] == "600.1" and start["recipient_user_id"] == "U1" and start["recipient_team_id"] == "T1"
        )
        assert slack.of("chat.appendStream") and slack.of("chat.stopStream")
        assert [d["ts"] for d in slack.of("chat.delete")] == [placeholder["_ts"]]  # one message in the thread
        assert final["ts"] == start["_ts"]  # the streamed message becomes the final answer
        calls = slack.of("chat.startStream") + slack.of("chat.appendStream") + slack.of("chat.stopStream")
        streamed = "".join(c["text"] for call in calls for c in call.get("chunks") or [])
        assert streamed.startswith("Within 5 minutes") and "see" in streamed  # whole words, in order
        assert "<!channel>" not in json.dumps(calls) and "evil.example" not in json.dumps(calls)
        assert "<!channel>" not in json.dumps(final) and "Within 5 minutes" in final["text"]
        assert "Sources" in _text_of(final) and "feedback_up" in _text_of(final)  # the buttons are kept
    finally:
        slack.close()


def test_without_slack_streaming_the_placeholder_grows_in_place(harness_factory: Any) -> None:
    slack = FakeSlack()
    slack.fail("chat.startStream", "unknown_method")
    try:
        h = harness_factory(Streaming(), slack=slack, options=EVERY_TOKEN)
        h.mention(ANSWERABLE, ts="610.1")
        h.finals(expect=1)
        h.mention(ANSWERABLE, ts="611.1")
        finals = h.finals(expect=2)
        updates = slack.of("chat.update")
        partial = [u for u in updates if not u.get("blocks")]
        assert len(partial) >= 4 and all(u["text"].endswith("…") for u in partial)
        placeholders = {p["_ts"] for p in slack.of("chat.postMessage")}
        assert {u["ts"] for u in updates} == placeholders == {f["ts"] for f in finals}  # updated in place
        assert "<!channel>" not in json.dumps(updates) and "evil.example" not in json.dumps(updates)
        assert len(slack.of("chat.startStream!")) == 1  # learned once: the second answer did not try again
        assert slack.of("chat.delete") == []
    finally:
        slack.close()


def test_assistant_threads_show_a_working_status(harness_factory: Any) -> None:
    h = harness_factory(Scripted())
    dm = {"type": "message", "channel_type": "im", "user": "U1", "channel": "D1"}
    h.slack.user_message("D1", "700.1", "Hi")
    h.event({**dm, "text": ANSWERABLE, "ts": "700.2", "thread_ts": "700.1"})
    h.finals(expect=1)
    statuses = h.slack.of("assistant.threads.setStatus")
    assert [s["status"] for s in statuses] == ["is looking through the docs…", ""]
    assert all(s["channel_id"] == "D1" and s["thread_ts"] == "700.1" for s in statuses)


def test_rate_limited_calls_are_retried_after_retry_after(harness_factory: Any) -> None:
    h = harness_factory(Scripted())
    h.slack.rate_limit("chat.postMessage", times=1)
    h.mention(ANSWERABLE, ts="700.1")
    (final,) = h.finals(expect=1)
    assert h.slack.throttled == ["chat.postMessage"]
    posts = [t for m, t in h.slack.seen_at if m == "chat.postMessage"]
    assert len(posts) == 2 and posts[1] - posts[0] >= 0.9  # waited for Retry-After: 1
    assert "[1]" in _text_of(final)


def test_channel_scoping_and_excluded_channels(harness_factory: Any) -> None:
    model = Scripted()
    scopes = ChannelScopes({"C1": ("engineering",)}, frozenset({"CQUIET"}))
    h = harness_factory(model, scopes=scopes)
    h.mention(ANSWERABLE, ts="800.1")  # C1 may only search engineering/, where nothing is indexed
    (final,) = h.finals(expect=1)
    assert "couldn't find" in _text_of(final) and "Searched: engineering/" in _text_of(final)
    h.event({"type": "app_mention", "user": "U1", "text": "<@UBOT> hi?", "ts": "801.1", "channel": "CQUIET"})
    assert h.slack.wait_for(lambda s: any(p["channel"] == "CQUIET" for p in s.of("chat.postMessage")), 10)
    quiet = [p for p in h.slack.of("chat.postMessage") if p["channel"] == "CQUIET"]
    assert len(quiet) == 1 and "not enabled in this channel" in quiet[0]["text"] and quiet[0]["thread_ts"] == "801.1"
    assert model.prompts == []


# -- what the docs don't answer -------------------------------------------------------------


def _click(h: Harness, value: str, action_id: str, user: str = "U9") -> None:
    payload = {
        "type": "block_actions",
        "user": {"id": user},
        "channel": {"id": "C1"},
        "team": {"id": "T1"},
        "api_app_id": "A1",
        "token": "x",
        "trigger_id": "t",
        "actions": [
            {"action_id": action_id, "block_id": "feedback", "value": value, "type": "button", "action_ts": "1"}
        ],
    }
    before = len(h.slack.of("chat.postEphemeral"))
    assert h.post(urllib.parse.urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded") == 200
    assert h.slack.wait_for(lambda s: len(s.of("chat.postEphemeral")) > before, 10)


def _home(h: Harness, user: str) -> str:
    """Open the App Home as ``user``; the published view's blocks as JSON text."""
    before = len(h.slack.of("views.publish"))
    assert h.event({"type": "app_home_opened", "user": user, "channel": "D7", "tab": "home", "event_ts": "1.2"}) == 200
    assert h.slack.wait_for(lambda s: len(s.of("views.publish")) > before, 30)
    published = h.slack.of("views.publish")[-1]
    view = published["view"] if isinstance(published["view"], dict) else json.loads(published["view"])
    assert published["user_id"] == user
    return json.dumps(view["blocks"], ensure_ascii=False)


def test_every_outcome_is_recorded_with_its_scope_and_counted_on_metrics(harness_factory: Any, tmp_path: Path) -> None:
    gaps = GapRecord(tmp_path / "gaps")
    metrics = Metrics(lambda: {})
    script: list[str | Exception] = [
        "Within 5 minutes [1].",
        "[0]",
        "Pagers are issued by the facilities team in Aarhus [1].",
        ModelError("the model process crashed"),
        RuntimeError("a defect"),
    ]
    h = harness_factory(Scripted(script=script), gaps=gaps, metrics=metrics)
    for i in range(5):  # one at a time: the script's order is the answering order
        h.mention(ANSWERABLE, ts=f"900.{i + 1}")
        h.finals(expect=i + 1)
    h.mention("How do I renew my Spanish passport?", ts="900.6")
    h.finals(expect=6)
    rows = gaps.asked()
    assert [r.outcome for r in rows] == [
        Outcome.ANSWERED,
        Outcome.POINTED,  # the model found no answer in the passages: they are pointed at
        Outcome.CLAIMS_REMOVED,
        Outcome.MODEL_FAILED,  # the passages were shown instead
        Outcome.ERROR,
        Outcome.REFUSED_GATE,
    ]
    assert all(r.surface == "slack" and r.scope is None for r in rows)
    assert [r.question for r in rows] == [ANSWERABLE] * 5 + ["How do I renew my Spanish passport?"]
    answered, pointed, _, model_failed, error, gate = rows
    assert pointed.vector is not None and model_failed.vector is not None
    assert answered.vector is not None and error.vector is None and error.nearest == ()
    assert gate.nearest and gate.gate is not None and gate.gate > 0
    page = metrics.render().decode()
    for kind in Outcome:  # an older Footnote's refused_model is on the page, at 0
        n = 0.0 if kind is Outcome.REFUSED_MODEL else 1.0
        assert f'footnote_outcomes_total{{outcome="{kind.value}"}} {n}' in page
    assert "footnote_errors_total 2.0" in page  # a model that failed is an error, passages shown or not


def test_a_thumbs_down_is_kept_with_its_question_and_makes_it_a_gap(harness_factory: Any, tmp_path: Path) -> None:
    gaps = GapRecord(tmp_path / "gaps")
    h = harness_factory(Scripted(), gaps=gaps)
    h.mention(ANSWERABLE, ts="910.1")
    (final,) = h.finals(expect=1)
    value = next(b for b in final["blocks"] if b["type"] == "actions")["elements"][0]["value"]
    assert "What the docs don't answer" in _home(h, "U7") and ANSWERABLE not in _home(h, "U7")  # answered: no gap
    _click(h, value, "feedback_up")
    _click(h, value, "feedback_down", user="U8")
    (row,) = gaps.asked()
    assert (row.outcome, row.up, row.down) == (Outcome.ANSWERED, 1, 1)
    home = _home(h, "U7")
    assert ANSWERABLE in home and "1×" in home and "👎 1" in home


def test_app_home_shows_only_the_gaps_the_viewers_channels_may_see(harness_factory: Any, tmp_path: Path) -> None:
    # Unlisted channels (and direct messages) search public/ only.
    scopes = ChannelScopes({"CENG": ("engineering",), "CHR": ("hr",), "*": ("public",)})
    gaps = GapRecord(tmp_path / "gaps")
    h = harness_factory(Scripted(), scopes=scopes, gaps=gaps)
    asked = [
        ("CENG", "Where do I get a parking permit for the office garage?"),
        ("CENG", "How do I apply for a parking pass at the office?"),
        ("CHR", "Can I get a parking pass for the office garage for my car?"),
        ("CHR", "How do I report harassment by my manager?"),
    ]
    for i, (channel, question) in enumerate(asked):  # nothing is indexed under engineering/ or hr/: refused
        h.mention(question, ts=f"920.{i + 1}", channel=channel)
    h.finals(expect=4)
    # Answered concurrently: recorded in the order they finished.
    assert sorted(r.scope for r in gaps.asked()) == [("engineering",), ("engineering",), ("hr",), ("hr",)]
    h.slack.member("U7", *[f"COTHER{i}" for i in range(250)], "CENG")  # the listing is paged
    h.slack.member("U8", "CHR")
    eng = _home(h, "U7")
    assert "2×" in eng and "parking" in eng
    assert "for my car" not in eng and "harassment" not in eng  # hr's questions stay in hr
    hr = _home(h, "U8")
    assert "for my car" in hr and "harassment" in hr and "office garage?" not in hr and "apply for" not in hr
    assert "2×" not in hr
    nobody = _home(h, "U9")  # only a direct message, which searches public/
    assert "Nothing you can see" in nobody and "parking" not in nobody
    h.slack.fail("users.conversations", "missing_scope")  # an app installed before it asked for channels:read
    assert "Nothing you can see" in _home(h, "U7")  # then only what a direct message may see


# -- pointers and what a teammate confirms ------------------------------------------------------

LATER = "sev1 page came in, what's the ack deadline?"  # the need UNSURE asks, in other words
ACK = "acknowledge the page within 5 minutes"


class _Logged(logging.Handler):
    """Waits for the app to log a line (a click it ignores is only logged: nothing else to wait on)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.changed = threading.Condition()
        logging.getLogger("footnote.slack").addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        with self.changed:
            self.lines.append(record.getMessage())
            self.changed.notify_all()

    def wait(self, fragment: str, count: int = 1, timeout: float = 30.0) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: sum(fragment in x for x in self.lines) >= count, timeout)

    def close(self) -> None:
        logging.getLogger("footnote.slack").removeHandler(self)
        super().close()


@pytest.fixture
def logged() -> Iterator[_Logged]:
    h = _Logged()
    yield h
    h.close()


def _act(h: Harness, action_id: str, value: str, user: str | None = "U9", channel: str = "C1") -> None:
    payload = {
        "type": "block_actions",
        "user": {"id": user} if user else {},
        "channel": {"id": channel},
        "team": {"id": "T1"},
        "api_app_id": "A1",
        "token": "x",
        "trigger_id": "t",
        "actions": [{"action_id": action_id, "block_id": "b", "value": value, "type": "button", "action_ts": "1"}],
    }
    assert h.post(urllib.parse.urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded") == 200


def _pointer_button(final: dict[str, Any], fragment: str = ACK) -> str:
    block = next(b for b in final["blocks"] if "accessory" in b and fragment in b["text"]["text"])
    return str(block["accessory"]["value"])


def test_an_unsure_question_gets_the_closest_passages_with_buttons_within_slacks_limits(harness_factory: Any) -> None:
    model = Scripted()
    h = harness_factory(model)
    h.mention(UNSURE, ts="1000.1")
    (final,) = h.finals(expect=1)
    body = _text_of(final)
    assert "not sure the docs answer this" in body and "not an answer" in body and ACK in body
    assert model.prompts == []  # pointing calls no model
    blocks = final["blocks"]
    buttons = [b["accessory"] for b in blocks if "accessory" in b]
    assert 1 <= len(buttons) <= 3 and len(blocks) <= 50
    for b in buttons:
        assert b["type"] == "button" and b["action_id"] == "pointer_confirm" and b["text"]["text"] == "This answers it"
        assert len(b["text"]["text"]) <= 75 and len(b["value"]) <= 2000
    (none,) = [e for b in blocks if b["type"] == "actions" for e in b["elements"]]
    assert none["action_id"] == "pointer_none" and none["text"]["text"] == "None of these"
    assert all(len(b["text"]["text"]) <= 3000 for b in blocks if b["type"] == "section")
    assert "<https://footnote.example/view/on-call.md?" in body  # each pointer links to its place


def test_this_answers_it_teaches_the_message_and_a_thumbs_down_unlearns_it(harness_factory: Any) -> None:
    model = Scripted()
    h = harness_factory(model)
    h.mention(UNSURE, ts="1001.1")
    (pointed,) = h.finals(expect=1)
    _act(h, "pointer_confirm", _pointer_button(pointed))
    assert h.slack.wait_for(lambda s: bool(s.of("chat.postEphemeral")), 10)
    (pair,) = h.learned.all()
    assert pair.message == UNSURE and ACK in pair.quote and pair.user == "U9" and pair.via == "pointer"
    h.mention(LATER, ts="1002.1")
    _, answered = h.finals(expect=2)
    assert "A teammate confirmed this passage" in _text_of(answered) and len(model.prompts) == 1
    value = next(b for b in answered["blocks"] if b["type"] == "actions")["elements"][1]["value"]
    _act(h, "feedback_down", value, user="U8")
    assert h.slack.wait_for(lambda s: len(s.of("chat.postEphemeral")) >= 2, 10)
    assert h.learned.all() == []
    h.mention(LATER, ts="1003.1")
    assert "not sure the docs answer this" in _text_of(h.finals(expect=3)[-1])


def test_a_thumbs_up_confirms_the_cited_passage(harness_factory: Any) -> None:
    h = harness_factory(Scripted())
    h.mention(ANSWERABLE, ts="1004.1")
    (final,) = h.finals(expect=1)
    value = next(b for b in final["blocks"] if b["type"] == "actions")["elements"][0]["value"]
    _act(h, "feedback_up", value)
    assert h.slack.wait_for(lambda s: bool(s.of("chat.postEphemeral")), 10)
    pairs = h.learned.all()
    assert pairs and {(p.message, p.via, p.user) for p in pairs} == {(ANSWERABLE, "answer", "U9")}


def test_a_click_from_another_channels_scope_changes_nothing(harness_factory: Any, logged: _Logged) -> None:
    h = harness_factory(Scripted(), scopes=ChannelScopes({"C2": ("engineering",)}))
    h.mention(UNSURE, ts="1005.1")  # C1 searches every document
    (final,) = h.finals(expect=1)
    _act(h, "pointer_confirm", _pointer_button(final), channel="C2")
    assert logged.wait("another channel scope")
    assert h.learned.all() == [] and h.slack.of("chat.postEphemeral") == []


def test_bad_clicks_are_ignored_and_logged(harness_factory: Any, logged: _Logged) -> None:
    h = harness_factory(Scripted())
    h.mention(UNSURE, ts="1006.1")
    (final,) = h.finals(expect=1)
    value = _pointer_button(final)
    fid = value.rpartition("#")[0]
    _act(h, "pointer_confirm", value, user=None)  # a click without a user
    _act(h, "pointer_confirm", "C1:1.1:123#1")  # a message Footnote never showed (or long forgotten)
    _act(h, "pointer_confirm", f"{fid}#9")  # a pointer the message did not show
    _act(h, "feedback_up", "nonsense")
    assert logged.wait("ignoring", count=4)
    assert h.learned.all() == [] and h.slack.of("chat.postEphemeral") == []


def test_none_of_these_makes_the_question_a_gap(harness_factory: Any, tmp_path: Path) -> None:
    gaps = GapRecord(tmp_path / "gaps")
    h = harness_factory(Scripted(), gaps=gaps)
    h.mention(UNSURE, ts="1007.1")
    (final,) = h.finals(expect=1)
    (none,) = [e for b in final["blocks"] if b["type"] == "actions" for e in b["elements"]]
    _act(h, "pointer_none", none["value"])
    assert h.slack.wait_for(lambda s: bool(s.of("chat.postEphemeral")), 10)
    (row,) = gaps.asked(gaps_only=True)
    assert (row.outcome, row.down) == (Outcome.POINTED, 1) and h.learned.all() == []


def _unreachable(folders: object) -> Health:
    raise StoreUnreachable("the index at http://chroma.invalid:8000 is not reachable (Connection refused)")


def test_while_the_index_store_is_down_status_home_and_clicks_say_so(harness_factory: Any) -> None:
    h = harness_factory(Scripted(), status=_unreachable)
    status, body = h.command_exchange("status")
    assert status == 200 and "can't be read right now" in body and "chroma.invalid" not in body
    assert "can't be read right now" in _home(h, "U7")
    h.mention(UNSURE, ts="1008.1")
    (final,) = h.finals(expect=1)  # answered from the index in memory
    h.learned.records = UnreachableRecords()  # type: ignore[assignment]
    _click(h, _pointer_button(final), "pointer_confirm")
    (told,) = h.slack.of("chat.postEphemeral")
    assert "couldn't record that" in told["text"] and told["user"] == "U9"  # the click is not lost in silence


# -- in the asker's language ----------------------------------------------------------------


def test_a_danish_question_is_told_in_danish_and_bad_input_gets_a_short_reply(harness_factory: Any) -> None:
    model = Scripted()
    h = harness_factory(model, language_of=Languages().detect)
    h.mention("Hvordan fornyer jeg mit pas, før jeg skal på ferie i Spanien til sommer?", ts="1100.1")
    (final,) = h.finals(expect=1)
    placeholder = next(p for p in h.slack.of("chat.postMessage") if p.get("thread_ts") == "1100.1")
    assert "Jeg kigger i dokumenterne" in placeholder["text"]
    assert "Jeg kunne ikke finde det i dokumenterne" in _text_of(final) and "Dette er ikke et svar" in _text_of(final)
    h.mention("🙂🙂", ts="1101.1")  # emoji only: nothing to answer, nothing journaled
    assert h.slack.wait_for(lambda s: any(p.get("thread_ts") == "1101.1" for p in s.of("chat.postMessage")), 10)
    (empty,) = [p for p in h.slack.of("chat.postMessage") if p.get("thread_ts") == "1101.1"]
    assert empty["text"] == "Ask me a question about the docs." and model.prompts == []
    h.mention(":shrug: :+1::skin-tone-2:", ts="1101.2")  # emoji as Slack writes them: the same
    assert h.slack.wait_for(lambda s: any(p.get("thread_ts") == "1101.2" for p in s.of("chat.postMessage")), 10)
    (codes,) = [p for p in h.slack.of("chat.postMessage") if p.get("thread_ts") == "1101.2"]
    assert codes["text"] == "Ask me a question about the docs." and model.prompts == []
    h.mention("Wie beantrage ich Urlaub bei meiner Firma in diesem Jahr?", ts="1102.1")
    german = _text_of(h.finals(expect=2)[-1])  # Footnote did not look, so it never says it found nothing
    assert "I answer questions in English and Danish" in german and "couldn't find" not in german
    assert model.prompts == []
