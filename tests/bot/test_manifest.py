"""The Slack app manifest asks for exactly the events, commands and interactivity the bot handles."""

from __future__ import annotations

from pathlib import Path

import yaml

from bot.builder import build_slack_bot
from retrieval.search.gate import GateConfig
from testkit.fakes import ScriptedModel
from testkit.slack import FakeSlack

MANIFEST = Path(__file__).resolve().parents[2] / "config" / "slack_manifest.yaml"


def test_manifest_subscribes_to_what_the_bot_handles(tmp_path: Path) -> None:
    from retrieval.answer import AnswerService

    slack = FakeSlack()  # Bolt asks auth.test when the app is built
    try:
        service = AnswerService(lambda: None, lambda: ScriptedModel("[0]"), GateConfig())  # type: ignore[arg-type,return-value]
        handled = build_slack_bot(service, "xoxb-test", "secret", tmp_path, api_url=slack.url).handlers()
    finally:
        slack.close()
    m = yaml.safe_load(MANIFEST.read_text())
    # message.im / message.channels / message.groups are all Bolt's "message" event.
    events = {e.split(".")[0] for e in m["settings"]["event_subscriptions"]["bot_events"]}
    assert events == set(handled["event"])
    assert {c["command"] for c in m["features"]["slash_commands"]} == set(handled["command"])
    assert {s["callback_id"] for s in m["features"]["shortcuts"]} == set(handled["shortcut"])
    assert m["settings"]["interactivity"]["is_enabled"] is bool(handled["action"] or handled["shortcut"])
    scopes = set(m["oauth_config"]["scopes"]["bot"])
    assert {"app_mentions:read", "chat:write", "commands", "im:history"} <= scopes
    assert m["features"]["app_home"]["home_tab_enabled"] is True


def test_every_conversation_whose_history_it_reads_sends_its_messages() -> None:
    """A follow-up in a thread comes as a message event of its conversation's kind: reading
    a kind's history without subscribing to its messages leaves those follow-ups unanswered
    (a group DM's, before message.mpim was subscribed)."""
    m = yaml.safe_load(MANIFEST.read_text())
    events = set(m["settings"]["event_subscriptions"]["bot_events"])
    history = {s.split(":")[0] for s in m["oauth_config"]["scopes"]["bot"] if s.endswith(":history")}
    assert history == {"channels", "groups", "im", "mpim"}
    assert {f"message.{kind}" for kind in history} <= events
