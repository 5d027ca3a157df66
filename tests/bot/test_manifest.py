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
    assert m["settings"]["interactivity"]["is_enabled"] is bool(handled["action"])  # the feedback buttons
    scopes = set(m["oauth_config"]["scopes"]["bot"])
    assert {"app_mentions:read", "chat:write", "commands", "im:history"} <= scopes
    assert m["features"]["app_home"]["home_tab_enabled"] is True
