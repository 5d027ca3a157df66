"""The real Bolt app in HTTP mode, fed signed requests, talking to a fake Slack Web API."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.fake_slack import FakeSlack, signed_post
from bot.health import index_health
from bot.http_server import make_server, serve_in_thread
from bot.scoping import ChannelScopes
from bot.slack_app import SlackBot
from retrieval.answer import AnswerService
from retrieval.engine import Engine
from retrieval.errors import ModelError
from retrieval.gate import GateConfig
from retrieval.llm import LanguageModel, Message, OnToken
from tests.conftest import EXAMPLES

SECRET = "test-signing-secret"
ANSWERABLE = "How fast must a SEV1 page be acknowledged?"


class Scripted:
    name = "scripted"

    def __init__(self, reply: str = "Within 5 minutes [1].", fail: bool = False) -> None:
        self.reply = reply
        self.fail = fail
        self.prompts: list[str] = []
        self.lock = threading.Lock()

    def complete(self, messages: list[Message], max_tokens: int, on_token: OnToken | None = None) -> str:
        with self.lock:
            self.prompts.append(messages[-1]["content"])
        if self.fail:
            raise ModelError("the model process crashed")
        return self.reply


class Harness:
    def __init__(self, engine: Engine, model: LanguageModel, data: Path, **bot_kw: Any) -> None:
        self.slack = FakeSlack()
        svc = AnswerService(engine.searcher, lambda: model, GateConfig(), docs_dir=EXAMPLES)
        self.bot = SlackBot(
            svc, "xoxb-test", SECRET, data, api_url=self.slack.url, status=lambda: index_health(engine), **bot_kw
        )
        self.server = make_server(self.bot.app, "127.0.0.1", 0, lambda: {"ok": True})
        serve_in_thread(self.server)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/slack/events"
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
        self._n += 1
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

    def mention(self, text: str, ts: str, thread_ts: str | None = None, **kw: Any) -> int:
        ev = {"type": "app_mention", "user": "U1", "text": f"<@UBOT> {text}", "ts": ts, "channel": "C1", "event_ts": ts}
        if thread_ts:
            ev["thread_ts"] = thread_ts
        return self.event(ev, **kw)

    def command(self, text: str) -> int:
        return self.command_exchange(text)[0]

    def command_exchange(self, text: str) -> tuple[int, str]:
        form = {
            "command": "/ask",
            "text": text,
            "user_id": "U1",
            "channel_id": "C1",
            "team_id": "T1",
            "trigger_id": "tr1",
            "response_url": "http://127.0.0.1:9/r",
        }
        return self.exchange(urllib.parse.urlencode(form), "application/x-www-form-urlencoded")

    def finals(self, expect: int | None = None) -> list[dict[str, Any]]:
        """Every final reply; with ``expect``, wait until that many have arrived."""
        deadline = time.time() + 120
        while expect is not None and len(self.slack.of("chat.update")) < expect and time.time() < deadline:
            time.sleep(0.02)
        assert self.bot.drain(120)
        return self.slack.of("chat.update")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.slack.close()


@pytest.fixture
def harness_factory(examples_engine: Engine, tmp_path: Path) -> Iterator[Any]:
    made: list[Harness] = []

    def make(model: LanguageModel, **bot_kw: Any) -> Harness:
        h = Harness(examples_engine, model, tmp_path / "data", **bot_kw)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()


def _text_of(update: dict[str, Any]) -> str:
    return json.dumps(update.get("blocks") or []) + update.get("text", "")


def test_mention_is_answered_in_its_thread_with_char_links(harness_factory: Any) -> None:
    h = harness_factory(Scripted())
    assert h.mention(ANSWERABLE, ts="100.1") == 200
    (final,) = h.finals(expect=1)
    first = h.slack.of("chat.postMessage")[0]
    assert first["thread_ts"] == "100.1" and "Looking through the docs" in first["text"]
    assert final["ts"] == first["_ts"]  # the placeholder is updated in place
    body = _text_of(final)
    assert "#char=" in body and "[1]" in body and "Sources" in body


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
    assert (
        h.mention(
            ANSWERABLE,
            ts="102.1",
            event_id="EvSAME",
            headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"},
        )
        == 200
    )
    h.finals(expect=1)
    time.sleep(0.5)  # give a wrongly accepted retry time to show up
    assert len(h.finals()) == 1
    assert len(h.slack.of("chat.postMessage")) == 1


def test_bad_or_stale_signature_is_rejected(harness_factory: Any) -> None:
    h = harness_factory(Scripted())
    assert h.mention(ANSWERABLE, ts="103.1", secret="wrong-secret") == 401
    assert h.mention(ANSWERABLE, ts="103.2", age=3600) == 401
    assert h.slack.of("chat.postMessage") == []


def test_model_failure_is_a_visible_error(harness_factory: Any) -> None:
    h = harness_factory(Scripted(fail=True))
    h.mention(ANSWERABLE, ts="104.1")
    (final,) = h.finals(expect=1)
    assert "Something went wrong" in final["text"] and "crashed" in final["text"]


def test_a_burst_of_twenty_questions_gets_twenty_replies(harness_factory: Any) -> None:
    h = harness_factory(Scripted())
    for i in range(20):
        assert h.mention(f"{ANSWERABLE} ({i})", ts=f"200.{i}") == 200
    finals = h.finals(expect=20)
    assert len(finals) == 20
    placeholders = h.slack.of("chat.postMessage")
    assert sorted(p["thread_ts"] for p in placeholders) == sorted(f"200.{i}" for i in range(20))
    assert any("queued behind" in p["text"] for p in placeholders)


def test_slash_command_posts_the_question_and_answers_in_its_thread(harness_factory: Any) -> None:
    h = harness_factory(Scripted())
    assert h.command(ANSWERABLE) == 200
    h.finals(expect=1)
    posts = h.slack.of("chat.postMessage")
    assert "asked:" in posts[0]["text"] and "thread_ts" not in posts[0]
    assert posts[1]["thread_ts"] == posts[0]["_ts"]


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
    h.event(
        {
            "type": "message",
            "channel_type": "channel",
            "user": "U1",
            "text": "and what if I cannot resolve it within 30 minutes?",
            "ts": "301.5",
            "thread_ts": "301.1",
            "channel": "C1",
        }
    )
    # Messages from bots and in unknown threads are ignored.
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
    assert len(h.finals(expect=3)) == 3
    time.sleep(0.3)
    assert len(h.finals()) == 3
    assert "Earlier question in this conversation: " + ANSWERABLE in model.prompts[-1]
    assert h.slack.of("chat.postMessage")[0]["thread_ts"] == "300.1"


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
    deadline = time.time() + 5
    while not h.slack.of("chat.postEphemeral") and time.time() < deadline:
        time.sleep(0.05)
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


def test_app_home_shows_index_health(harness_factory: Any, examples_engine: Engine) -> None:
    h = harness_factory(Scripted())
    assert h.event({"type": "app_home_opened", "user": "U7", "channel": "D7", "tab": "home", "event_ts": "1.2"}) == 200
    deadline = time.time() + 10
    while not h.slack.of("views.publish") and time.time() < deadline:
        time.sleep(0.02)
    (published,) = h.slack.of("views.publish")
    view = published["view"] if isinstance(published["view"], dict) else json.loads(published["view"])
    assert published["user_id"] == "U7" and view["type"] == "home"
    assert f"{examples_engine.manifest.totals()['chunks']} chunks" in json.dumps(view["blocks"])


class Streaming(Scripted):
    """Writes its reply a few characters at a time, like a real model."""

    def complete(self, messages: list[Message], max_tokens: int, on_token: OnToken | None = None) -> str:
        pieces = ["Within ", "5 ", "minutes ", "<!channel> ", "[1]", "."]
        for p in pieces:
            time.sleep(0.15)
            if on_token:
                on_token(p)
        return "".join(pieces)


def test_the_answer_grows_in_place_while_the_model_writes(harness_factory: Any) -> None:
    h = harness_factory(Streaming(), stream_interval_s=0.2)
    h.mention(ANSWERABLE, ts="600.1")
    updates = h.finals(expect=1)
    partial, final = updates[:-1], updates[-1]
    assert len(partial) >= 2 and all(u["text"].endswith("…") for u in partial)
    assert all(u["ts"] == final["ts"] for u in updates)  # one message, updated in place
    assert "<!channel>" not in json.dumps(updates) and "Within 5 minutes" in final["text"]
    assert "Sources" in _text_of(final)


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
    scopes = ChannelScopes.parse("C1=engineering", "CQUIET")
    h = harness_factory(model, scopes=scopes)
    h.mention(ANSWERABLE, ts="800.1")  # C1 may only search engineering/, where nothing is indexed
    (final,) = h.finals(expect=1)
    assert "couldn't find" in _text_of(final) and "Searched: engineering/" in _text_of(final)
    h.event({"type": "app_mention", "user": "U1", "text": "<@UBOT> hi?", "ts": "801.1", "channel": "CQUIET"})
    deadline = time.time() + 5
    while len(h.slack.of("chat.postMessage")) < 2 and time.time() < deadline:
        time.sleep(0.02)
    quiet = [p for p in h.slack.of("chat.postMessage") if p["channel"] == "CQUIET"]
    assert len(quiet) == 1 and "not enabled in this channel" in quiet[0]["text"] and quiet[0]["thread_ts"] == "801.1"
    assert model.prompts == []
