"""The Slack app manifest asks for every event, command and scope the bot uses."""

from __future__ import annotations

from pathlib import Path

import yaml

MANIFEST = Path(__file__).resolve().parents[2] / "config" / "slack_manifest.yaml"


def test_manifest_subscribes_to_what_the_bot_handles() -> None:
    m = yaml.safe_load(MANIFEST.read_text())
    events = set(m["settings"]["event_subscriptions"]["bot_events"])
    assert {"app_mention", "message.im", "app_home_opened"} <= events
    assert [c["command"] for c in m["features"]["slash_commands"]] == ["/ask"]
    scopes = set(m["oauth_config"]["scopes"]["bot"])
    assert {"app_mentions:read", "chat:write", "commands", "im:history"} <= scopes
    assert m["features"]["app_home"]["home_tab_enabled"] is True
    assert m["settings"]["interactivity"]["is_enabled"] is True  # the feedback buttons
